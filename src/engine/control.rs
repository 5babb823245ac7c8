//! One run's host side, whichever backend runs it: what Node's thread does to a run it
//! started (answer its host calls and data requests, abort it).
use std::sync::Arc;

use super::{Engine, ProcessRun};
use crate::isolate::{HostReply, RunShared};
use crate::v8::DataAnswer;

/// What the host side of one run can do, whichever backend runs it.
pub(crate) trait RunControl: Send + Sync {
    fn reply(&self, reply: HostReply);
    fn answer(&self, id: u32, answer: DataAnswer) -> bool;
    fn abort(&self);
}

/// A run on one of this process's isolate threads.
pub(crate) struct ThreadRun {
    pub run: Arc<RunShared>,
    pub engine: Engine,
}

impl RunControl for ThreadRun {
    fn reply(&self, reply: HostReply) {
        self.run.push_reply(reply);
    }

    fn answer(&self, id: u32, answer: DataAnswer) -> bool {
        self.run.push_answer(id, answer)
    }

    fn abort(&self) {
        self.engine.abort(&self.run);
    }
}

impl RunControl for ProcessRun {
    fn reply(&self, reply: HostReply) {
        ProcessRun::reply(self, reply);
    }

    fn answer(&self, id: u32, answer: DataAnswer) -> bool {
        ProcessRun::answer(self, id, answer)
    }

    fn abort(&self) {
        ProcessRun::abort(self);
    }
}
