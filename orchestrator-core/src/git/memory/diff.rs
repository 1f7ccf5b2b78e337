//! Diff statistics helpers for [`MemoryGit`](super::MemoryGit): git's binary-file test and a
//! minimal line diff.

/// Git's rule: a NUL byte in the first 8000 bytes makes a file binary.
pub(super) fn is_binary(content: &[u8]) -> bool {
    content.iter().take(8000).any(|b| *b == 0)
}

/// Lines removed and added by a minimal line diff of `a` to `b`.
pub(super) fn line_changes(a: &[u8], b: &[u8]) -> (usize, usize) {
    let a: Vec<&[u8]> = a.split_inclusive(|c| *c == b'\n').collect();
    let b: Vec<&[u8]> = b.split_inclusive(|c| *c == b'\n').collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let (a, b) = (&a[prefix..], &b[prefix..]);
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (a, b) = (&a[..a.len() - suffix], &b[..b.len() - suffix]);
    if a.len().saturating_mul(b.len()) > 4_000_000 {
        return (a.len(), b.len()); // too large for the quadratic table: count it all as changed
    }
    // Longest common subsequence, one row at a time.
    let mut row = vec![0usize; b.len() + 1];
    for x in a {
        let mut diagonal = 0;
        for (j, y) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if x == y {
                diagonal + 1
            } else {
                above.max(row[j])
            };
            diagonal = above;
        }
    }
    let common = row[b.len()];
    (a.len() - common, b.len() - common)
}
