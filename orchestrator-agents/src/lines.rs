//! Turns a child's output pipe into log lines as they arrive.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use orchestrator_core::runner::{LogSink, LogStream};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// Called with every line of output, besides the log (e.g. to parse an agent's JSON events).
pub type LineObserver = Arc<dyn Fn(LogStream, &str) + Send + Sync>;

/// Rewrites every line of output before it goes anywhere (log, observer, stderr tail), e.g. to
/// redact secrets.
pub type LineRewrite = Arc<dyn Fn(String) -> String + Send + Sync>;

/// Where the lines of one stream go.
pub(crate) struct LineOut {
    pub(crate) stream: LogStream,
    pub(crate) log: LogSink,
    pub(crate) observer: Option<LineObserver>,
    pub(crate) rewrite: Option<LineRewrite>,
    pub(crate) tail: Option<Arc<Tail>>,
    pub(crate) max_line_bytes: usize,
}

impl LineOut {
    /// Emits one line: `bytes` kept (without the newline) and `cut` bytes dropped past the cap.
    /// Waits while the log writes out a full buffer, which holds the reader back instead of
    /// letting output pile up in memory.
    async fn emit(&self, bytes: &[u8], cut: usize) {
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let mut line = String::from_utf8_lossy(bytes).into_owned();
        if cut > 0 {
            line.push_str(&format!(" … [{cut} more bytes cut]"));
        }
        if let Some(rewrite) = &self.rewrite {
            line = rewrite(line);
        }
        self.log.write_line(self.stream, &line).await;
        if let Some(observer) = &self.observer {
            observer(self.stream, &line);
        }
        if let Some(tail) = &self.tail {
            tail.push(line);
        }
    }
}

/// The last few lines of a stream, kept for failure messages.
#[derive(Debug)]
pub(crate) struct Tail {
    lines: Mutex<Kept>,
    capacity: usize,
    /// Most bytes kept (lines with their newlines); older lines go first.
    max_bytes: usize,
}

#[derive(Debug, Default)]
struct Kept {
    lines: VecDeque<String>,
    bytes: usize,
}

impl Tail {
    /// The last `capacity` lines.
    pub(crate) fn new(capacity: usize) -> Self {
        Tail {
            lines: Mutex::new(Kept {
                lines: VecDeque::with_capacity(capacity.min(64)),
                bytes: 0,
            }),
            capacity,
            max_bytes: usize::MAX,
        }
    }

    /// The last lines that fit in `max_bytes` (a job's output: memory stays bounded however
    /// much it prints).
    pub(crate) fn of_bytes(max_bytes: usize) -> Self {
        Tail {
            lines: Mutex::new(Kept::default()),
            capacity: usize::MAX,
            max_bytes,
        }
    }

    fn push(&self, line: String) {
        if self.capacity == 0 {
            return;
        }
        let mut kept = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        kept.bytes += line.len() + 1;
        kept.lines.push_back(line);
        while kept.lines.len() > self.capacity || kept.bytes > self.max_bytes {
            match kept.lines.pop_front() {
                Some(old) => kept.bytes -= old.len() + 1,
                None => break,
            }
        }
    }

    /// The kept lines joined, each ending in a newline.
    pub(crate) fn text(&self) -> String {
        let kept = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        let mut text = String::with_capacity(kept.bytes);
        for line in &kept.lines {
            text.push_str(line);
            text.push('\n');
        }
        text
    }

    pub(crate) fn snapshot(&self) -> Vec<String> {
        let kept = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        kept.lines.iter().cloned().collect()
    }
}

/// Reads `reader` to its end, emitting each line as soon as its newline arrives; a final line
/// without a newline is emitted at the end. Lines longer than the cap are cut (the rest of the
/// line is read and dropped, so memory stays bounded); invalid UTF-8 is replaced.
pub(crate) async fn pump<R: AsyncRead + Unpin>(reader: R, out: LineOut) {
    let mut reader = BufReader::new(reader);
    let mut line: Vec<u8> = Vec::new();
    let mut cut = 0usize;
    loop {
        let chunk = match reader.fill_buf().await {
            Ok([]) => break,
            Ok(chunk) => chunk,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                out.log.line(
                    LogStream::System,
                    &format!("reading {:?} failed: {e}", out.stream),
                );
                break;
            }
        };
        let newline = chunk.iter().position(|&b| b == b'\n');
        let content = &chunk[..newline.unwrap_or(chunk.len())];
        let room = out.max_line_bytes.saturating_sub(line.len());
        let keep = room.min(content.len());
        line.extend_from_slice(&content[..keep]);
        cut += content.len() - keep;
        let consumed = newline.map_or(chunk.len(), |i| i + 1);
        reader.consume(consumed);
        if newline.is_some() {
            out.emit(&line, cut).await;
            line.clear();
            cut = 0;
        }
    }
    if !line.is_empty() || cut > 0 {
        out.emit(&line, cut).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines_of(input: &[u8], max: usize) -> (String, Vec<String>) {
        let log = LogSink::detached();
        let tail = Arc::new(Tail::new(2));
        let out = LineOut {
            stream: LogStream::Stderr,
            log: log.clone(),
            observer: None,
            rewrite: None,
            tail: Some(tail.clone()),
            max_line_bytes: max,
        };
        pump(input, out).await;
        (log.take(), tail.snapshot())
    }

    #[tokio::test]
    async fn splits_lines_and_keeps_a_partial_last_line() {
        let (log, tail) = lines_of(b"one\r\ntwo\n\nlast", 100).await;
        assert_eq!(
            log,
            "[stderr] one\n[stderr] two\n[stderr] \n[stderr] last\n"
        );
        assert_eq!(tail, vec!["".to_string(), "last".to_string()]);
    }

    #[tokio::test]
    async fn cuts_long_lines_and_replaces_invalid_utf8() {
        let mut input = vec![b'x'; 10_000];
        input.extend_from_slice(b"\n\xff\xfeok\n");
        let (log, _) = lines_of(&input, 8).await;
        assert_eq!(
            log,
            "[stderr] xxxxxxxx … [9992 more bytes cut]\n[stderr] \u{fffd}\u{fffd}ok\n"
        );
    }

    #[tokio::test]
    async fn empty_input_emits_nothing() {
        let (log, tail) = lines_of(b"", 8).await;
        assert_eq!(log, "");
        assert!(tail.is_empty());
    }
}
