//! A script carries only the shared Lua it uses. The shared files (`lua/slots/common.lua`,
//! `lua/fair/common.lua`, `lua/fair/time.lua`, `lua/fair/serve.lua`, ...) are read as pieces: each piece
//! is one top-level `local` definition (`local function f`, `local a, b = ...`) with the comment lines
//! above it. A script keeps the pieces its own part names, the pieces those name, and so on, in the files'
//! order; the rest is left out. A Lua function allows 200 locals, and every shared definition is one:
//! the concatenated files alone came close to it (`fair/lua_limits.rs` checks every script's margin).
//!
//! The reading is textual and errs on keeping: any identifier equal to a piece's name keeps that piece
//! (a field, a string or a local of the same name too), except in whole-line comments. The shared files
//! must keep to this shape: at the top level only `local` definitions, each starting at column 0; a
//! definition reads only definitions above it (as Lua requires of locals anyway).
//!
//! What is sent carries no whole-line comment and no blank line ([`without_comments`]): the sources keep
//! their comments (each script's KEYS/ARGV/Returns header), the server needs none of them, and a function
//! library repeats in each function's block the shared pieces it uses.

/// `parts` (shared files, then the script's own code last) with the shared pieces the last part does not
/// use, directly or through other pieces, left out, and without comment lines or blank lines.
pub fn only_used(parts: &[&str]) -> String {
    let (own, shared) = parts.split_last().expect("a script's own part");
    let pieces: Vec<Piece> = shared.iter().flat_map(|p| pieces(p)).collect();
    let keep = kept(&pieces, own);
    let mut out = code_of(&pieces, |i| keep[i]);
    out.push_str(&without_comments(own));
    out
}

/// Several scripts that share one chunk (a function library): the shared pieces two or more of `owns` use
/// (directly or through other pieces), once, as the chunk's top level; then, for each of `owns`, the
/// pieces only it uses followed by itself. A piece two scripts use needs only pieces two scripts use, so
/// the top level reads nothing defined after it.
pub fn shared_by_several(shared: &[&str], owns: &[String]) -> (String, Vec<String>) {
    let pieces: Vec<Piece> = shared.iter().flat_map(|p| pieces(p)).collect();
    let keeps: Vec<Vec<bool>> = owns.iter().map(|own| kept(&pieces, own)).collect();
    let users = |i: usize| keeps.iter().filter(|k| k[i]).count();
    let top = code_of(&pieces, |i| users(i) > 1);
    let each = owns
        .iter()
        .zip(&keeps)
        .map(|(own, keep)| {
            let mut out = code_of(&pieces, |i| keep[i] && users(i) == 1);
            out.push_str(&without_comments(own));
            out
        })
        .collect();
    (top, each)
}

/// Which of `pieces` `own` uses, directly or through other pieces.
fn kept(pieces: &[Piece], own: &str) -> Vec<bool> {
    let mut needed: Vec<&str> = identifiers(own).collect();
    let mut keep = vec![false; pieces.len()];
    for (i, piece) in pieces.iter().enumerate().rev() {
        if piece.names.iter().any(|n| needed.contains(n)) {
            keep[i] = true;
            needed.extend(identifiers(piece.text));
        }
    }
    keep
}

/// The code of the pieces `take` picks, in order, without comment lines or blank lines.
fn code_of(pieces: &[Piece], take: impl Fn(usize) -> bool) -> String {
    (0..pieces.len())
        .filter(|&i| take(i))
        .map(|i| without_comments(pieces[i].text))
        .collect()
}

/// `code` without its whole-line comments and blank lines (the Lua here has no long strings or long
/// comments, `[[ ... ]]`, whose lines this would cut). A comment after code stays.
pub fn without_comments(code: &str) -> String {
    code.split_inclusive('\n')
        .filter(|l| {
            let t = l.trim();
            !t.is_empty() && !t.starts_with("--")
        })
        .collect()
}

struct Piece<'a> {
    names: Vec<&'a str>,
    text: &'a str,
}

/// A file's top-level definitions, each with the comment lines above it (a file's head comment goes with
/// its first definition).
fn pieces(file: &str) -> Vec<Piece<'_>> {
    let mut starts = Vec::new(); // where each piece's text begins, and its `local` line
    let mut comment_from: Option<usize> = None;
    let mut at = 0;
    for line in file.split_inclusive('\n') {
        if line.starts_with("--") || (line.trim().is_empty() && comment_from.is_some()) {
            comment_from.get_or_insert(at);
        } else if line.starts_with("local ") {
            starts.push((comment_from.unwrap_or(at), at));
            comment_from = None;
        } else if !line.trim().is_empty() {
            comment_from = None;
        }
        at += line.len();
    }
    if let Some(first) = starts.first_mut() {
        first.0 = 0;
    }
    let mut out = Vec::new();
    for (i, &(begin, local_at)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(file.len(), |s| s.0);
        out.push(Piece {
            names: defined(&file[local_at..]),
            text: &file[begin..end],
        });
    }
    out
}

/// The names a `local ...` line defines.
fn defined(line: &str) -> Vec<&str> {
    let line = line.lines().next().unwrap_or("");
    let rest = line.strip_prefix("local ").unwrap_or(line);
    if let Some(f) = rest.strip_prefix("function ") {
        return identifiers(f).take(1).collect();
    }
    let names = rest.split('=').next().unwrap_or(rest);
    identifiers(names).collect()
}

/// The identifiers `code` names outside whole-line comments.
fn identifiers(code: &str) -> impl Iterator<Item = &str> {
    code.lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .flat_map(|l| {
            l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_what_the_script_uses_directly_or_through_others_in_order() {
        let shared = "-- head\nlocal A = 1\n\n-- b uses A\nlocal function b()\n  return A\nend\n\
                      local function c() return 3 end\nlocal d, e = {}, {}\n";
        let out = only_used(&[shared, "return b(), e\n"]);
        assert_eq!(
            out,
            "local A = 1\nlocal function b()\n  return A\nend\nlocal d, e = {}, {}\nreturn b(), e\n"
        );
        assert_eq!(only_used(&[shared, "return 1\n"]), "return 1\n");
    }

    #[test]
    fn a_name_in_a_whole_line_comment_keeps_nothing() {
        let shared = "local function c() return 3 end\n";
        assert_eq!(only_used(&[shared, "-- c()\nreturn 1\n"]), "return 1\n");
    }

    #[test]
    fn pieces_two_scripts_use_are_shared_once_the_rest_stay_with_their_script() {
        let shared =
            "local A = 1\nlocal function b() return A end\nlocal function c() return 3 end\n";
        let owns = ["return b()\n".to_string(), "return b() + c()\n".to_string()];
        let (top, each) = shared_by_several(&[shared], &owns);
        assert_eq!(top, "local A = 1\nlocal function b() return A end\n");
        assert_eq!(
            each,
            [
                "return b()\n",
                "local function c() return 3 end\nreturn b() + c()\n"
            ]
        );
    }

    #[test]
    fn what_is_sent_has_no_comment_line_or_blank_line() {
        let code = "-- KEYS  a\n\nlocal x = 1 -- stays\n  -- indented\n   \nreturn x\n";
        assert_eq!(without_comments(code), "local x = 1 -- stays\nreturn x\n");
    }
}
