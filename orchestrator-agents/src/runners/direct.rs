//! Shell commands that need no shell (SPEC §17): a `shell` work command that is one plain
//! simple command — words of ordinary characters, no quoting, expansion, redirection,
//! operator, assignment or comment, its first word no shell keyword or builtin — runs its
//! program directly, as `make` does, instead of through `sh -c`. A POSIX shell would run
//! exactly that (`sh -c 'true'` ends in one `execve` of `true`), so output, exit code, signals
//! and environment are the same; only the shell's own start is saved. Anything the shell
//! would treat differently — a program not found or not directly runnable, a relative `PATH`
//! entry — goes to the shell, which then gives its own answer.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::env::ChildEnv;

/// Words that make a command the shell's own: keywords, and builtins that have no program of
/// the same name or behave differently from it (`echo`, `printf`, `pwd`, `test`, `kill`...).
const SHELL_WORDS: &[&str] = &[
    "!", "{", "}", "[", "[[", "]]", ".", ":", "alias", "bg", "break", "case", "cd", "command",
    "continue", "do", "done", "echo", "elif", "else", "esac", "eval", "exec", "exit", "export",
    "fc", "fg", "fi", "for", "function", "getopts", "hash", "if", "in", "jobs", "kill", "let",
    "local", "printf", "pwd", "read", "readonly", "return", "select", "set", "shift", "source",
    "test", "then", "time", "times", "trap", "type", "typeset", "ulimit", "umask", "unalias",
    "unset", "until", "wait", "while",
];

/// The words of `command` when it is one plain simple command (see the module docs);
/// `None` when the shell must read it.
pub(crate) fn plain_words(command: &str) -> Option<Vec<&str>> {
    let ordinary = |c: char| c.is_ascii_alphanumeric() || "_-./,:+@%=".contains(c);
    if !command
        .chars()
        .all(|c| ordinary(c) || c == ' ' || c == '\t')
    {
        return None;
    }
    let words: Vec<&str> = command
        .split([' ', '\t'])
        .filter(|w| !w.is_empty())
        .collect();
    let first = *words.first()?;
    if first.contains('=') || SHELL_WORDS.contains(&first) {
        return None;
    }
    Some(words)
}

/// The file the shell would run for command word `word` in `dir` with `env`, when the system
/// can run it directly: a path with a slash (relative to `dir`), else the first `PATH` entry
/// holding an executable file of that name (every entry absolute); an ELF binary or a `#!`
/// script. `None` in every other case (the shell decides).
pub(crate) fn program_file(word: &str, env: &ChildEnv, dir: &Path) -> Option<PathBuf> {
    // Each file is looked at once (this runs for every shell job): its metadata decides both
    // whether it is there and whether it is an executable file.
    let (candidate, meta) = if word.contains('/') {
        let file = dir.join(word);
        let meta = std::fs::metadata(&file).ok()?;
        (file, meta)
    } else {
        let path = env.get("PATH")?;
        let mut found = None;
        for entry in std::env::split_paths(path) {
            // An empty or relative entry is searched from the current directory: the shell's.
            if !entry.is_absolute() {
                return None;
            }
            let file = entry.join(word);
            if let Ok(meta) = std::fs::metadata(&file) {
                found = Some((file, meta));
                break;
            }
        }
        found?
    };
    runs_directly(&candidate, &meta).then_some(candidate)
}

/// Whether `file`, with metadata `meta`, is an executable regular file the kernel runs itself
/// (ELF, or `#!`).
#[cfg(unix)]
fn runs_directly(file: &Path, meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = meta.is_file() && meta.permissions().mode() & 0o111 != 0;
    if !executable {
        return false;
    }
    let mut head = [0u8; 4];
    let read = std::fs::File::open(file).and_then(|mut f| f.read(&mut head));
    matches!(read, Ok(n) if (n == 4 && head == *b"\x7fELF") || (n >= 2 && head[..2] == *b"#!"))
}

#[cfg(not(unix))]
fn runs_directly(_: &Path, _: &std::fs::Metadata) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_simple_commands_are_words() {
        assert_eq!(plain_words("true"), Some(vec!["true"]));
        assert_eq!(
            plain_words("  make -j4 CFLAGS=-O2\tall "),
            Some(vec!["make", "-j4", "CFLAGS=-O2", "all"])
        );
        assert_eq!(
            plain_words("./build.sh a/b.txt 1,2 x:y @z 50%"),
            Some(vec!["./build.sh", "a/b.txt", "1,2", "x:y", "@z", "50%"])
        );
        for shell in [
            "",
            "   ",
            "echo hi",
            "cd dir",
            "A=1 make",
            "ls *.rs",
            "cat a > b",
            "a | b",
            "a; b",
            "a && b",
            "echo $HOME",
            "echo 'q'",
            "echo \"q\"",
            "a \\ b",
            "~/bin/x",
            "x # c",
            "a\nb",
            "(a)",
            "{ a; }",
            "if",
            "exit 3",
            "pwd",
            "[ -f x ]",
            "test -f x",
            "a `b`",
            "ls ?",
            "ls [ab]",
            "! true",
            "printf x",
            "kill 1",
            ". ./env",
            "x&",
        ] {
            assert_eq!(plain_words(shell), None, "{shell:?}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn programs_are_found_as_the_shell_finds_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("bin");
        let write = |name: &str, text: &str, mode: u32| {
            use std::os::unix::fs::PermissionsExt;
            let file = bin.join(name);
            std::fs::write(&file, text).expect("write");
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).expect("mode");
            file
        };
        let script = write("script", "#!/bin/sh\necho hi\n", 0o755);
        write("noshebang", "echo hi\n", 0o755);
        write("plain", "#!/bin/sh\n", 0o644);
        let mut env = ChildEnv::empty();
        env.set("PATH", format!("{}:/usr/bin:/bin", bin.display()));
        assert_eq!(
            program_file("script", &env, dir.path()),
            Some(script.clone())
        );
        assert_eq!(program_file("bin/script", &env, dir.path()), Some(script));
        assert!(program_file("true", &env, dir.path()).is_some_and(|p| p.ends_with("true")));
        // The shell runs these itself, or says why not.
        assert_eq!(program_file("noshebang", &env, dir.path()), None);
        assert_eq!(program_file("plain", &env, dir.path()), None);
        assert_eq!(program_file("missing-program", &env, dir.path()), None);
        assert_eq!(program_file("bin", &env, dir.path()), None);
        env.set("PATH", format!("relative:{}", bin.display()));
        assert_eq!(program_file("script", &env, dir.path()), None);
        assert_eq!(program_file("script", &ChildEnv::empty(), dir.path()), None);
    }
}
