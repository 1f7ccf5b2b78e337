//! The globs of permission rules: `*` within a segment, `**` across segments (`**/` also
//! none), `?` one character other than the separator; shell globs have no segments.

/// Whether `glob` has no wildcard.
pub(crate) fn is_literal(glob: &str) -> bool {
    !glob.contains(['*', '?'])
}

/// For a shell glob `words *` (a literal command prefix, a space and a final `*`): the words.
pub(crate) fn command_prefix(glob: &str) -> Option<&str> {
    let words = glob
        .strip_suffix("**")
        .or_else(|| glob.strip_suffix('*'))?
        .strip_suffix(' ')?
        .trim();
    (!words.is_empty() && is_literal(words)).then_some(words)
}

/// One element of a glob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    /// A character standing for itself.
    Char(char),
    /// `?`: one character, not the separator.
    One,
    /// `*`: any text within a segment.
    Star,
    /// `**`: any text.
    Any,
    /// `**/`: nothing, or any text ending in the separator.
    Dirs,
}

fn tokens(glob: &str, sep: Option<char>) -> Vec<Token> {
    let mut out = Vec::new();
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        let token = match c {
            '?' => Token::One,
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                match sep {
                    Some(s) if chars.peek() == Some(&s) => {
                        chars.next();
                        Token::Dirs
                    }
                    _ => Token::Any,
                }
            }
            '*' if sep.is_none() => Token::Any,
            '*' => Token::Star,
            c => Token::Char(c),
        };
        out.push(token);
    }
    out
}

/// Whether `text` matches `glob` (see the module docs), `sep` separating segments.
pub(crate) fn glob_match(glob: &str, text: &str, sep: Option<char>) -> bool {
    let tokens = tokens(glob, sep);
    let text: Vec<char> = text.chars().collect();
    let (n, m) = (tokens.len(), text.len());
    let not_sep = |j: usize| text.get(j).is_some_and(|&c| Some(c) != sep);
    // ok[i][j]: tokens[i..] match text[j..]; filled from the ends.
    let mut ok = vec![vec![false; m + 1]; n + 1];
    ok[n][m] = true;
    for i in (0..n).rev() {
        // For `**/`: whether some separator at k >= j has tokens[i + 1..] matching after it.
        let mut dirs = false;
        for j in (0..=m).rev() {
            ok[i][j] = match tokens[i] {
                Token::Char(c) => text.get(j) == Some(&c) && ok[i + 1][j + 1],
                Token::One => not_sep(j) && ok[i + 1][j + 1],
                Token::Star => ok[i + 1][j] || (not_sep(j) && ok[i][j + 1]),
                Token::Any => ok[i + 1][j] || (j < m && ok[i][j + 1]),
                Token::Dirs => {
                    dirs = dirs || (j < m && Some(text[j]) == sep && ok[i + 1][j + 1]);
                    ok[i + 1][j] || dirs
                }
            };
        }
    }
    ok[0][0]
}
