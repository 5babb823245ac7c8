//! One run's host side, whichever backend runs it: what Node's thread does to a run it
//! started (answer its host calls and data requests, abort it).
use crate::isolate::HostReply;
use crate::v8::DataAnswer;

/// What the host side of one run can do, whichever backend runs it.
pub(crate) trait RunControl: Send + Sync {
    fn reply(&self, reply: HostReply);
    fn answer(&self, id: u32, answer: DataAnswer) -> bool;
    fn abort(&self);
}
