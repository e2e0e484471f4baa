//! `/roles` on a terminal: pick one of a list with the arrow keys (or j/k),
//! Enter to choose, q or Esc to keep the current one. The terminal is put in
//! raw mode for the pick and restored afterwards, whatever happens.

use std::io::Write;
use std::os::fd::AsFd;

use nix::sys::termios::{SetArg, Termios, cfmakeraw, tcgetattr, tcsetattr};

/// A key the picker understands.
#[derive(Debug, PartialEq, Eq)]
enum Key {
    Up,
    Down,
    Enter,
    Cancel,
    Other,
}

/// Restores the terminal's settings when dropped.
struct Raw(Termios);

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &self.0);
    }
}

fn byte() -> Option<u8> {
    let mut b = [0u8; 1];
    match nix::unistd::read(std::io::stdin().as_fd(), &mut b) {
        Ok(1) => Some(b[0]),
        _ => None,
    }
}

fn key() -> Key {
    match byte() {
        None | Some(3) | Some(b'q') => Key::Cancel,
        Some(b'\r') | Some(b'\n') => Key::Enter,
        Some(b'k') => Key::Up,
        Some(b'j') => Key::Down,
        Some(0x1b) => match (byte(), byte()) {
            (Some(b'[') | Some(b'O'), Some(b'A')) => Key::Up,
            (Some(b'[') | Some(b'O'), Some(b'B')) => Key::Down,
            _ => Key::Cancel,
        },
        Some(_) => Key::Other,
    }
}

/// Where the selection goes after `key`: `Ok(Some(i))` chosen, `Ok(None)` cancelled, `Err(i)` moved.
fn step(key: Key, at: usize, len: usize) -> Result<Option<usize>, usize> {
    match key {
        Key::Up => Err(at.checked_sub(1).unwrap_or(len - 1)),
        Key::Down => Err((at + 1) % len),
        Key::Enter => Ok(Some(at)),
        Key::Cancel => Ok(None),
        Key::Other => Err(at),
    }
}

fn draw(out: &mut impl Write, items: &[String], at: usize, again: bool) -> std::io::Result<()> {
    if again {
        write!(out, "\x1b[{}A", items.len())?;
    }
    for (i, item) in items.iter().enumerate() {
        let mark = if i == at { "> " } else { "  " };
        write!(out, "\r\x1b[2K{mark}{}\r\n", crate::output::escape(item))?;
    }
    out.flush()
}

/// Let the person pick one of `items` (starting at `at`); `None` when they
/// cancel or standard input is not a terminal.
pub(crate) fn pick(items: &[String], at: usize) -> std::io::Result<Option<usize>> {
    if items.is_empty() {
        return Ok(None);
    }
    let stdin = std::io::stdin();
    let saved = tcgetattr(stdin.as_fd())?;
    let mut raw = saved.clone();
    cfmakeraw(&mut raw);
    tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw)?;
    let _restore = Raw(saved);
    let mut out = std::io::stderr();
    write!(out, "pick a role (↑/↓, Enter; q keeps the current one)\r\n")?;
    let mut at = at.min(items.len() - 1);
    draw(&mut out, items, at, false)?;
    loop {
        match step(key(), at, items.len()) {
            Ok(chosen) => return Ok(chosen),
            Err(next) => {
                at = next;
                draw(&mut out, items, at, true)?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrows_wrap_around_and_enter_or_cancel_end_the_pick() {
        assert_eq!(step(Key::Down, 0, 3), Err(1));
        assert_eq!(step(Key::Down, 2, 3), Err(0));
        assert_eq!(step(Key::Up, 0, 3), Err(2));
        assert_eq!(step(Key::Other, 1, 3), Err(1));
        assert_eq!(step(Key::Enter, 1, 3), Ok(Some(1)));
        assert_eq!(step(Key::Cancel, 1, 3), Ok(None));
    }
}
