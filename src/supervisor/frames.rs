//! What a host's frames mean: each checked against its run's budget
//! (`policy::EventBudget`) and turned into the run's events, or the host ended for
//! breaking the protocol.
use isolet_core::frame::{self, Header, Kind, WireDone, WireHealth, WireReady};
use isolet_core::host_policy::{self as policy, HostEnd};
use isolet_core::{ErrorKind, Failure};

use super::process::RssReader;
use super::reader::{CountBounds, Precount};
use super::{HostPhase, State};
use crate::isolate::run::ExecStats;
use crate::isolate::Completion;

impl State {
    /// The largest payload host `key` may send in a frame with `h`'s header.
    pub(super) fn frame_limit(&self, key: u64, h: &Header) -> Result<usize, String> {
        let Some(host) = self.host(key) else { return Err("a frame of a host that ended".into()) };
        if h.kind == Kind::SandboxClosed {
            return Ok(policy::MAX_CONTROL_FRAME_BYTES);
        }
        if h.run_id == 0 {
            return match h.kind {
                Kind::Health | Kind::Ready | Kind::Invalid | Kind::Bye | Kind::Lower => Ok(policy::MAX_CONTROL_FRAME_BYTES),
                _ => Err(format!("a {:?} frame of no run", h.kind)),
            };
        }
        let Some(id) = host.runs.get(&h.run_id) else { return Err("a frame for no run in flight".into()) };
        let run = self.runs.get(id).ok_or("a frame for no run in flight")?;
        Ok(policy::frame_limit(&run.bridge))
    }

    /// What a frame's values are counted against (`HostFrames::hand_over` counts a big one
    /// off the state lock): `None` for a frame that is not a host call or result of a run
    /// in flight here.
    pub(super) fn count_bounds(&self, key: u64, h: &Header) -> Option<CountBounds> {
        let id = self.host(key)?.runs.get(&h.run_id)?;
        let run = self.runs.get(id)?;
        match h.kind {
            Kind::HostCall => Some(CountBounds { values: run.budget.args_bounds(), log_entries: 0, log_bytes: 0 }),
            Kind::Done => Some(CountBounds {
                values: crate::isolate::thread::output_bounds(&run.bridge),
                log_entries: run.bridge.max_log_entries,
                log_bytes: run.bridge.max_log_bytes,
            }),
            _ => None,
        }
    }

    /// A frame from host `key`; `Err` ends the host for breaking the protocol. `pre`: its
    /// host-call arguments or result counted already (see `HostFrames::hand_over`).
    pub(super) fn on_frame(&mut self, key: u64, h: Header, payload: Vec<u8>, rss: &RssReader, pre: Option<Precount>) -> Result<(), String> {
        let bad = |e: frame::FrameError| e.to_string();
        match h.kind {
            Kind::Ready => {
                let ready = WireReady::decode(&payload).map_err(bad)?;
                let rss_mb = rss.mb().unwrap_or(0);
                let Some(host) = self.host_mut(key) else { return Ok(()) };
                if host.phase != HostPhase::Starting {
                    return Err("a second ready".into());
                }
                host.phase = HostPhase::Serving;
                host.ready_rss_mb = rss_mb;
                host.health = ready.health;
                host.stuck_at_ready = ready.health.stuck;
                host.warm_left = ready.health.warm;
                // A sandbox's host: its open (then any run made meanwhile) only now, so
                // nothing of the sandbox reaches the host before it has locked itself down.
                let pending = std::mem::take(&mut host.pending);
                if let Some(w) = host.writer.clone() {
                    let parts: Vec<&[u8]> = pending.iter().map(Vec::as_slice).collect();
                    if !parts.is_empty() {
                        w.send(&parts);
                    }
                }
                self.lockdown.get_or_insert(ready.lockdown);
                self.starts.ready();
                self.cannot_start = None;
                self.dispatch();
                return Ok(());
            }
            Kind::Invalid => {
                // Only before ready: no sandboxed code has run in the host yet.
                if self.host(key).is_some_and(|h| h.phase != HostPhase::Starting) {
                    return Err("an invalid frame after ready".into());
                }
                let why = frame::decode_invalid(&payload).map_err(bad)?.to_string();
                self.invalid_config.get_or_insert(why);
                self.end_host(key, HostEnd::Shutdown);
                return Ok(());
            }
            Kind::Bye => return Ok(()),
            Kind::SandboxClosed => {
                // Counted like health frames: a compromised host cannot flood them either.
                let Some(host) = self.host_mut(key) else { return Ok(()) };
                host.health_frames += 1;
                if !policy::health_allowed(host.health_frames, host.done_frames, host.born.elapsed().as_millis() as u64) {
                    return Err("more sandbox-closed frames than a host sends".into());
                }
                let reason = frame::decode_sandbox_closed(&payload).map_err(bad)?;
                self.sandbox_closed_on_host(key, h.run_id, reason);
                return Ok(());
            }
            Kind::Lower | Kind::Health => {
                // A compromised host could flood these to take this thread's time.
                let Some(host) = self.host_mut(key) else { return Ok(()) };
                host.health_frames += 1;
                if !policy::health_allowed(host.health_frames, host.done_frames, host.born.elapsed().as_millis() as u64) {
                    return Err("more health frames than a host sends".into());
                }
                let pid = host.pid;
                if h.kind == Kind::Health {
                    self.note_health(key, WireHealth::decode(&payload).map_err(bad)?);
                    return Ok(());
                }
                // Its own threads only (checked against its task list): lowering them harms
                // no one but the host. Each is a thread stuck at full priority otherwise.
                for tid in frame::decode_lower(&payload).map_err(bad)? {
                    if let Some(pid) = pid {
                        crate::limits::quarantine::lower_thread_of(pid, tid);
                    }
                }
                return Ok(());
            }
            _ => {}
        }
        let id = *self.host(key).and_then(|host| host.runs.get(&h.run_id)).ok_or("a frame for no run in flight")?;
        let frame_bytes = payload.len() + frame::HEADER_BYTES;
        let run = self.runs.get_mut(&id).ok_or("a frame for no run in flight")?;
        let over = |e: policy::OverBudget| e.0.to_string();
        match h.kind {
            Kind::Started => {
                run.budget.started().map_err(over)?;
                if !std::mem::replace(&mut run.started_sent, true) {
                    run.sink.started();
                }
            }
            Kind::Console => {
                run.budget.console(frame_bytes).map_err(over)?;
                let (level, message) = frame::decode_console(&payload).map_err(bad)?;
                run.plan = None;
                run.sink.console(level, message);
            }
            Kind::HostCall => {
                let (name, at) = frame::decode_host_call(&payload).map_err(bad)?;
                run.budget.host_call(h.call_id, payload.len() - at).map_err(over)?;
                match pre {
                    Some(counted) => run.budget.host_call_counted(h.call_id, counted).map_err(over)?,
                    None => run.budget.host_call_values(h.call_id, &payload[at..]).map_err(over)?,
                }
                let name = name.to_string();
                let mut args = payload;
                args.drain(..at);
                run.plan = None;
                run.sink.host_call(h.call_id, &name, args);
            }
            Kind::ModuleRequest => {
                // Counted and awaited like a data request (its answer is an `Answer` frame).
                run.budget.module_request(h.call_id, frame_bytes).map_err(over)?;
                let (key, referrer) = frame::decode_module_request(&payload).map_err(bad)?;
                let typescript = isolet_core::modules::is_typescript(key, run.language);
                let (key, referrer) = (key.to_string(), referrer.to_string());
                run.plan = None;
                run.sink.module_request(h.call_id, &key, &referrer, typescript);
            }
            Kind::DataRequest => {
                run.budget.data_request(h.call_id, frame_bytes).map_err(over)?;
                let key_text = std::str::from_utf8(&payload).map_err(|_| "a data key that is not UTF-8".to_string())?;
                run.plan = None;
                run.sink.data_request(h.call_id, key_text);
            }
            Kind::Done => {
                let (done, at) = WireDone::decode(&payload, run.bridge.max_log_entries, run.bridge.max_log_bytes).map_err(bad)?;
                let s = done.stats;
                let result = match done.result {
                    // Counted before Node's thread builds it: the host's isolate did, unless
                    // the host is compromised (isolet-core `value_count`).
                    Ok(()) => match pre
                        .unwrap_or_else(|| isolet_core::tally(&payload[at..], crate::isolate::thread::output_bounds(&run.bridge)))
                    {
                        Ok(_) => {
                            let mut out = payload;
                            out.drain(..at);
                            Ok(out)
                        }
                        Err(isolet_core::CountError::TooMany { .. }) => Err(Failure::too_many_output_values(run.bridge.max_output_values)),
                        Err(isolet_core::CountError::TooCostly { .. }) => Err(isolet_core::limits::too_costly_output(
                            crate::isolate::thread::over_budget_cost(&payload[at..]),
                            run.bridge.max_output_bytes,
                        )),
                        Err(e) => Err(Failure::new(ErrorKind::Runtime, format!("The result could not be copied out of the sandbox: {e}"))),
                    },
                    Err(f) => Err(f),
                };
                let completion = Completion {
                    result,
                    stats: ExecStats {
                        wall_time_ms: s.wall_time_ms,
                        cpu_time_ms: s.cpu_time_ms,
                        heap_used_bytes: s.heap_used_bytes,
                        heap_peak_bytes: s.heap_peak_bytes,
                        host_calls: s.host_calls,
                        unhandled_rejections: s.unhandled_rejections,
                    },
                    logs: done.logs,
                };
                if let Some(host) = self.host_mut(key) {
                    host.done_frames += 1;
                }
                self.finish(id, completion);
                self.note_health(key, done.health);
                self.after_run_left(key);
                self.dispatch();
            }
            other => return Err(format!("a {other:?} frame from a host")),
        }
        Ok(())
    }
}
