//! Console output captured from a run, bounded in entries and bytes so a chatty or
//! hostile script cannot grow host memory through `console.log`.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Log,
    Info,
    Warn,
    Error,
    Debug,
}

impl LogLevel {
    /// From the seam's numeric level (log, info, warn, error, debug).
    pub fn from_index(i: u32) -> LogLevel {
        match i {
            1 => LogLevel::Info,
            2 => LogLevel::Warn,
            3 => LogLevel::Error,
            4 => LogLevel::Debug,
            _ => LogLevel::Log,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Log => "log",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
            LogLevel::Debug => "debug",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    pub level: LogLevel,
    pub message: String,
}

/// Keeps at most `max_entries` entries and `max_bytes` bytes of messages; anything
/// beyond is counted in `dropped` and summarised by one final marker entry.
#[derive(Debug)]
pub struct LogBuffer {
    entries: Vec<LogEntry>,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
    dropped: u64,
}

impl LogBuffer {
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        LogBuffer { entries: Vec::new(), bytes: 0, max_entries, max_bytes, dropped: 0 }
    }

    /// Records one entry, truncating its message to the remaining byte budget.
    /// Returns whether anything was kept.
    pub fn push(&mut self, level: LogLevel, message: &str) -> bool {
        if self.entries.len() >= self.max_entries || self.bytes >= self.max_bytes {
            self.dropped += 1;
            return false;
        }
        let room = self.max_bytes - self.bytes;
        let message = if message.len() <= room {
            message.to_string()
        } else {
            let mut cut = room;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{}… [truncated]", &message[..cut])
        };
        self.bytes += message.len();
        self.entries.push(LogEntry { level, message });
        true
    }

    /// The entry kept last (as kept: possibly truncated).
    pub fn last(&self) -> Option<&LogEntry> {
        self.entries.last()
    }

    /// Message bytes the next entry may still keep: 0 once entries or bytes are used up.
    pub fn room(&self) -> usize {
        if self.entries.len() >= self.max_entries {
            return 0;
        }
        self.max_bytes.saturating_sub(self.bytes)
    }

    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The kept entries, plus a warning entry saying how many were dropped.
    pub fn finish(mut self) -> Vec<LogEntry> {
        if self.dropped > 0 {
            self.entries.push(LogEntry {
                level: LogLevel::Warn,
                message: format!("[isolet] {} console entries dropped (log limit reached)", self.dropped),
            });
        }
        self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_entries_until_the_count_cap() {
        let mut b = LogBuffer::new(2, 1000);
        assert!(b.push(LogLevel::Log, "a"));
        assert!(b.push(LogLevel::Warn, "b"));
        assert!(!b.push(LogLevel::Log, "c"));
        let out = b.finish();
        assert_eq!(out.len(), 3);
        assert_eq!(out[1], LogEntry { level: LogLevel::Warn, message: "b".into() });
        assert!(out[2].message.contains("1 console entries dropped"));
    }

    #[test]
    fn truncates_to_the_byte_cap_on_a_char_boundary() {
        let mut b = LogBuffer::new(10, 5);
        assert!(b.push(LogLevel::Log, "héllo world"));
        assert!(!b.push(LogLevel::Log, "more"));
        let out = b.finish();
        assert!(out[0].message.starts_with("héll"));
        assert!(out[0].message.len() < "héllo world".len() + 20);
        assert!(out[0].message.ends_with("[truncated]"));
        assert_eq!(b_levels(&out), vec!["log", "warn"]);
    }

    fn b_levels(v: &[LogEntry]) -> Vec<&'static str> {
        v.iter().map(|e| e.level.as_str()).collect()
    }

    #[test]
    fn room_is_what_the_next_entry_may_keep() {
        let mut b = LogBuffer::new(2, 10);
        assert_eq!(b.room(), 10);
        b.push(LogLevel::Log, "abcd");
        assert_eq!(b.room(), 6);
        b.push(LogLevel::Log, "x");
        assert_eq!(b.room(), 0, "entry cap reached");
        let mut b = LogBuffer::new(5, 3);
        b.push(LogLevel::Log, "abcdef");
        assert_eq!(b.room(), 0, "byte cap reached");
        assert_eq!(LogBuffer::new(0, 100).room(), 0);
    }

    #[test]
    fn levels_round_trip_from_the_seam() {
        let names: Vec<_> = (0..5).map(|i| LogLevel::from_index(i).as_str()).collect();
        assert_eq!(names, ["log", "info", "warn", "error", "debug"]);
    }
}
