//! Host-side capabilities that need native code.
//!
//! Only the file-read capability lives here: it must resolve sandbox-supplied paths
//! through a directory handle (`cap-std`) rather than by string checks. The fetch
//! capability is plain JavaScript (`lib/capabilities/fetch.js`).
pub mod file_read;
