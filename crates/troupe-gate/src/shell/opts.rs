//! Command-line options as GNU tools read them, for [`argv`](super::argv):
//! enough to tell operands from option values.

use super::walk::Arg;

/// Options and operands of a command line, GNU style: `--` ends options,
/// `--name=value`, `--name value` for `long_with_arg`, short clusters (`-sft DIR`,
/// `-tDIR`) with the letters of `short_with_arg` taking the rest or the next word.
pub(super) struct Parsed {
    pub opts: Vec<(String, Option<Arg>)>,
    pub operands: Vec<Arg>,
}

impl Parsed {
    pub fn has(&self, name: &str) -> bool {
        self.opts.iter().any(|(n, _)| n == name)
    }

    pub fn value(&self, name: &str) -> Option<Arg> {
        self.opts.iter().rev().find(|(n, _)| n == name).and_then(|(_, v)| v.clone())
    }

    pub fn target(&self) -> Option<Arg> {
        self.value("t").or(self.value("target-directory"))
    }
}

pub(super) fn options(args: &[Arg], short_with_arg: &str, long_with_arg: &[&str]) -> Parsed {
    parse_options(args, short_with_arg, long_with_arg, false)
}

/// [`options`] that stop at the first operand (the rest is a command line).
pub(super) fn options_until_operand(args: &[Arg], short_with_arg: &str, long_with_arg: &[&str]) -> Parsed {
    parse_options(args, short_with_arg, long_with_arg, true)
}

fn parse_options(args: &[Arg], short_with_arg: &str, long_with_arg: &[&str], stop: bool) -> Parsed {
    let mut parsed = Parsed { opts: Vec::new(), operands: Vec::new() };
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let v = a[0].as_str();
        i += 1;
        if v == "--" {
            parsed.operands.extend(args[i..].iter().cloned());
            break;
        }
        if let Some(long) = v.strip_prefix("--") {
            match long.split_once('=') {
                Some((n, val)) => parsed.opts.push((n.to_string(), Some(vec![val.to_string()]))),
                None if long_with_arg.contains(&long) => {
                    parsed.opts.push((long.to_string(), args.get(i).cloned()));
                    i += 1;
                }
                None => parsed.opts.push((long.to_string(), None)),
            }
            continue;
        }
        if let Some(cluster) = v.strip_prefix('-').filter(|c| !c.is_empty()) {
            for (at, c) in cluster.char_indices() {
                if short_with_arg.contains(c) {
                    let attached = &cluster[at + c.len_utf8()..];
                    let value = if attached.is_empty() {
                        i += 1;
                        args.get(i - 1).cloned()
                    } else {
                        Some(vec![attached.to_string()])
                    };
                    parsed.opts.push((c.to_string(), value));
                    break;
                }
                parsed.opts.push((c.to_string(), None));
            }
            continue;
        }
        parsed.operands.push(a.clone());
        if stop {
            parsed.operands.extend(args[i..].iter().cloned());
            break;
        }
    }
    parsed
}

/// The words after a wrapper's options: the wrapped command line.
pub(super) fn skip_options<'a>(args: &'a [Arg], short_with_arg: &str, long_with_arg: &[&str]) -> &'a [Arg] {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let v = a[0].as_str();
        if v == "--" {
            return &args[i + 1..];
        }
        if let Some(long) = v.strip_prefix("--") {
            i += if !long.contains('=') && long_with_arg.contains(&long) { 2 } else { 1 };
            continue;
        }
        match v.strip_prefix('-') {
            // `nice -5`, `nice -n 5`, `sudo -u root`
            Some(cluster) if !cluster.is_empty() => {
                let last = cluster.chars().last().unwrap_or(' ');
                i += if cluster.len() == 1 && short_with_arg.contains(last) { 2 } else { 1 };
            }
            _ => return &args[i..],
        }
    }
    &[]
}
