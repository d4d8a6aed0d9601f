//! Line framing: one compact JSON message per `\n`-terminated line, at most
//! [`MAX_MESSAGE_BYTES`] bytes before the newline.
//!
//! A line that grows past the limit is reported as [`Frame::Oversized`] as
//! soon as the limit is crossed; the reader then discards the rest of that
//! line as it arrives, without storing it, and resumes at the next line. So a
//! peer sending an endless line costs at most the limit in memory.

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// Largest message accepted, excluding the `\n` (spec: 4 MiB).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// Read buffer per connection (spec "Buffer Size": 64 KiB).
pub const READ_BUFFER_BYTES: usize = 64 * 1024;

/// What the reader found next.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A complete line, without its `\n`.
    Line(&'a [u8]),
    /// A line crossed the size limit; its remainder will be skipped.
    Oversized {
        /// The limit that was crossed.
        limit: usize,
    },
    /// The peer closed the connection in the middle of a line.
    Truncated {
        /// Bytes of the unfinished line that had arrived.
        received: usize,
    },
}

/// Reads frames from a byte stream.
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: BufReader<R>,
    line: Vec<u8>,
    limit: usize,
    discarding: bool,
    finished: bool,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader with the spec's 4 MiB limit.
    pub fn new(inner: R) -> Self {
        FrameReader::with_limit(inner, MAX_MESSAGE_BYTES)
    }

    /// A reader with a custom limit (tests and benches).
    pub fn with_limit(inner: R, limit: usize) -> Self {
        FrameReader {
            inner: BufReader::with_capacity(READ_BUFFER_BYTES, inner),
            line: Vec::new(),
            limit,
            discarding: false,
            finished: false,
        }
    }

    /// Changes the limit for lines read from now on. A server reads the
    /// first line with a small limit and raises it once `hello` succeeded
    /// (`specs/ipc/README.md`, "Connection limits").
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    /// The next frame, or `None` at a clean end of stream.
    pub async fn next_frame(&mut self) -> std::io::Result<Option<Frame<'_>>> {
        self.line.clear();
        if self.finished {
            return Ok(None);
        }
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                self.finished = true;
                let received = self.line.len();
                return Ok((received > 0 && !self.discarding).then_some(Frame::Truncated { received }));
            }
            let newline = memchr::memchr(b'\n', available);
            let chunk_len = newline.unwrap_or(available.len());
            if self.discarding {
                self.inner.consume(chunk_len + usize::from(newline.is_some()));
                if newline.is_some() {
                    self.discarding = false;
                }
                continue;
            }
            if self.line.len() + chunk_len > self.limit {
                self.inner.consume(chunk_len + usize::from(newline.is_some()));
                self.discarding = newline.is_none();
                // Give back what the oversized line had grown to.
                self.line = Vec::new();
                return Ok(Some(Frame::Oversized { limit: self.limit }));
            }
            self.line.extend_from_slice(&available[..chunk_len]);
            match newline {
                Some(_) => {
                    self.inner.consume(chunk_len + 1);
                    return Ok(Some(Frame::Line(&self.line)));
                }
                None => self.inner.consume(chunk_len),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(input: &[u8], limit: usize) -> Vec<String> {
        let mut reader = FrameReader::with_limit(input, limit);
        let mut seen = Vec::new();
        while let Some(frame) = reader.next_frame().await.unwrap() {
            seen.push(match frame {
                Frame::Line(line) => format!("line:{}", String::from_utf8_lossy(line)),
                Frame::Oversized { limit } => format!("oversized:{limit}"),
                Frame::Truncated { received } => format!("truncated:{received}"),
            });
        }
        seen
    }

    #[tokio::test]
    async fn splits_lines_and_reports_a_truncated_tail() {
        assert_eq!(frames(b"a\nbc\n\nxyz", 8).await, ["line:a", "line:bc", "line:", "truncated:3"]);
        assert!(frames(b"", 8).await.is_empty());
    }

    #[tokio::test]
    async fn oversized_line_is_reported_once_and_the_next_line_survives() {
        let mut input = vec![b'x'; 20];
        input.extend_from_slice(b"\nok\n");
        assert_eq!(frames(&input, 8).await, ["oversized:8", "line:ok"]);
        // Exactly at the limit is still accepted.
        assert_eq!(frames(b"12345678\n", 8).await, ["line:12345678"]);
        // An oversized line cut off by EOF is not reported a second time.
        assert_eq!(frames(&[b'y'; 30], 8).await, ["oversized:8"]);
    }
}
