//! Splitting a byte stream into lines across reads.

/// Longest line kept whole; longer lines are cut so one runaway line cannot
/// exhaust memory (the cut part is reported as a raw event).
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// Accumulates bytes from successive reads and yields complete lines, keeping
/// a partial last line until its newline arrives.
#[derive(Debug, Default)]
pub struct LineSplitter {
    buf: Vec<u8>,
    max: usize,
}

impl LineSplitter {
    /// A splitter with the default line limit.
    pub fn new() -> Self {
        LineSplitter { buf: Vec::new(), max: MAX_LINE }
    }

    /// A splitter that cuts lines longer than `max` bytes.
    pub fn with_max(max: usize) -> Self {
        LineSplitter { buf: Vec::new(), max: max.max(1) }
    }

    /// Feeds bytes; calls `f` with every complete line (without `\n` / `\r\n`).
    pub fn push(&mut self, mut bytes: &[u8], mut f: impl FnMut(&[u8])) {
        while let Some(pos) = memchr(b'\n', bytes) {
            let (line, rest) = bytes.split_at(pos);
            if self.buf.is_empty() {
                f(trim_cr(line));
            } else {
                self.buf.extend_from_slice(line);
                f(trim_cr(&self.buf));
                self.buf.clear();
            }
            bytes = &rest[1..];
        }
        self.buf.extend_from_slice(bytes);
        while self.buf.len() > self.max {
            let rest = self.buf.split_off(self.max);
            f(&self.buf);
            self.buf = rest;
        }
    }

    /// Ends the stream: a final line without a newline is still a line.
    pub fn finish(&mut self, mut f: impl FnMut(&[u8])) {
        if !self.buf.is_empty() {
            f(trim_cr(&self.buf));
            self.buf.clear();
        }
    }
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Position of the first `needle`, eight bytes at a time (the classic
/// "has zero byte" trick): line splitting is on the hot path of every run.
fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let pattern = LO.wrapping_mul(needle as u64);
    let mut chunks = hay.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes")) ^ pattern;
        let found = word.wrapping_sub(LO) & !word & HI;
        if found != 0 {
            return Some(offset + (found.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    chunks.remainder().iter().position(|&b| b == needle).map(|i| offset + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]], max: usize) -> Vec<String> {
        let mut s = LineSplitter::with_max(max);
        let mut out = Vec::new();
        for c in chunks {
            s.push(c, |l| out.push(String::from_utf8_lossy(l).into_owned()));
        }
        s.finish(|l| out.push(String::from_utf8_lossy(l).into_owned()));
        out
    }

    #[test]
    fn partial_lines_across_reads() {
        assert_eq!(split(&[b"{\"a\":", b"1}\n{\"b\"", b":2}\r\n", b"tail"], 100), ["{\"a\":1}", "{\"b\":2}", "tail"]);
        assert_eq!(split(&[b"a\n\nb\n"], 100), ["a", "", "b"]);
        assert_eq!(split(&[b"x", b"y", b"z\n"], 100), ["xyz"]);
    }

    #[test]
    fn memchr_finds_the_first_match_at_every_offset() {
        for len in 0..40 {
            for at in 0..len {
                let mut hay = vec![b'a'; len];
                hay[at] = b'\n';
                if at + 3 < len {
                    hay[at + 3] = b'\n';
                }
                assert_eq!(memchr(b'\n', &hay), Some(at), "len {len} at {at}");
            }
            assert_eq!(memchr(b'\n', &vec![0x8a; len]), None);
        }
    }

    #[test]
    fn runaway_lines_are_cut() {
        assert_eq!(split(&[b"abcdefg", b"h\nij\n"], 3), ["abc", "def", "gh", "ij"]);
    }
}
