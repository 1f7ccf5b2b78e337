//! A [`LogSink`] with a writer hands its lines on in bounded chunks, in order (issue 12,
//! item 2: memory must not grow with a job's output).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use orchestrator_core::runner::{LogSink, LogStream, LogWriter};

/// A writer collecting the chunks it is handed.
fn collecting() -> (LogWriter, Arc<Mutex<Vec<String>>>) {
    let chunks = Arc::new(Mutex::new(Vec::new()));
    let seen = chunks.clone();
    let writer: LogWriter = Arc::new(
        move |text: String| -> Pin<Box<dyn Future<Output = ()> + Send>> {
            let seen = seen.clone();
            Box::pin(async move {
                tokio::task::yield_now().await;
                seen.lock().expect("chunks").push(text);
            })
        },
    );
    (writer, chunks)
}

#[tokio::test]
async fn lines_go_out_in_bounded_chunks_and_in_order() {
    let (writer, chunks) = collecting();
    let sink = LogSink::detached().with_writer(writer);
    let mut expected = String::new();
    for i in 0..100_000 {
        let line = format!("line {i:06} {}", "=".repeat(i % 90));
        let stream = if i % 7 == 0 {
            expected.push_str("[stderr] ");
            LogStream::Stderr
        } else {
            LogStream::Stdout
        };
        expected.push_str(&line);
        expected.push('\n');
        sink.write_line(stream, &line).await;
    }
    sink.flush().await;
    assert_eq!(sink.take(), "", "everything was written out");
    let chunks = chunks.lock().expect("chunks");
    assert!(chunks.len() > 1, "one chunk: the output was held whole");
    for chunk in chunks.iter() {
        assert!(
            chunk.len() < LogSink::FLUSH_BYTES + 200,
            "a chunk of {} bytes",
            chunk.len()
        );
        assert!(chunk.ends_with('\n'), "a chunk ends mid-line");
    }
    assert_eq!(chunks.concat(), expected);
}

#[tokio::test]
async fn two_producers_flushing_at_once_keep_each_ones_order() {
    let (writer, chunks) = collecting();
    let sink = LogSink::detached().with_writer(writer);
    let producer = |name: &'static str, sink: LogSink| async move {
        for i in 0..20_000 {
            sink.write_line(
                LogStream::Stdout,
                &format!("{name} {i:05} {}", "-".repeat(40)),
            )
            .await;
        }
    };
    tokio::join!(producer("a", sink.clone()), producer("b", sink.clone()));
    sink.flush().await;
    let text = chunks.lock().expect("chunks").concat();
    for name in ["a", "b"] {
        let numbers: Vec<usize> = text
            .lines()
            .filter_map(|l| {
                l.strip_prefix(name)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .collect();
        assert_eq!(numbers, (0..20_000).collect::<Vec<_>>(), "lines of {name}");
    }
}

#[tokio::test]
async fn without_a_writer_lines_stay_for_take() {
    let sink = LogSink::detached();
    sink.write_line(LogStream::Stdout, "one").await;
    sink.line(LogStream::Stderr, "two");
    sink.flush().await;
    assert_eq!(sink.take(), "one\n[stderr] two\n");
}
