//! Teams kept in a repository's Squad folder: `.squad/`, or the legacy `.ai-team/` (SPEC §13).
//!
//! A Squad folder holds:
//! - `team.md`: an optional `# Team name` heading and a roster table whose header row has the
//!   columns `Member` and `Role` (any case, any order; optionally `Agent`, `Model`, `Effort`);
//! - `agents/<member>/charter.md`: the member's system prompt, at most [`CHARTER_CAP`]
//!   characters;
//! - `routing.md`: given to the orchestrator when it plans;
//! - `decisions.md`: prepended to every worker's prompt.
//!
//! The files are read as text only: nothing in them is run, included or followed, and a file
//! reached through a symbolic link is refused (a repository could otherwise point a charter at
//! a secret and have it sent to an agent, or have [`save`] overwrite a file outside the folder).
//!
//! ```
//! use orchestrator_workflows::squad;
//! let repo = tempfile::tempdir().unwrap();
//! std::fs::create_dir(repo.path().join(".squad")).unwrap();
//! std::fs::write(
//!     repo.path().join(".squad/team.md"),
//!     "# Reviewers\n\n| Member | Role |\n|---|---|\n| Alice | security reviewer |\n",
//! )
//! .unwrap();
//! let (dir, team) = squad::discover(repo.path()).unwrap().unwrap();
//! assert!(dir.ends_with(".squad"));
//! assert_eq!(team.name, "Reviewers");
//! assert_eq!(team.workers[0].name, "alice");
//! assert_eq!(team.workers[0].system_prompt.as_deref(), Some("You are security reviewer."));
//! ```

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use orchestrator_core::plan::{Effort, WorkerSpec};

use crate::{Error, Result};

/// The most characters of a charter (a worker's system prompt); a longer one is cut.
pub const CHARTER_CAP: usize = 4_000;

/// The Squad folders looked for in a repository, preferred first.
pub const SQUAD_DIRS: [&str; 2] = [".squad", ".ai-team"];

/// The largest Squad file read, in bytes.
const MAX_FILE_BYTES: u64 = 1 << 20;
/// The most characters of a role derived from a system prompt.
const ROLE_CAP: usize = 120;

const TEAM_FILE: &str = "team.md";
const ROUTING_FILE: &str = "routing.md";
const DECISIONS_FILE: &str = "decisions.md";
const AGENTS_DIR: &str = "agents";
const CHARTER_FILE: &str = "charter.md";
const DEFAULT_TEAM_NAME: &str = "squad";
const NAME_RULE: &str = "a name is 3–64 characters of a-z, 0-9 and -";

/// A team read from (or to be written to) a Squad folder.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SquadTeam {
    /// Its name: `team.md`'s `# heading`, else the name of the folder holding the Squad folder.
    pub name: String,
    /// Its members, in roster order; each one's system prompt is its charter (or its role).
    pub workers: Vec<WorkerSpec>,
    /// `routing.md`: context for the orchestrator when it plans.
    pub routing: Option<String>,
    /// `decisions.md`: shared knowledge prepended to every worker's prompt.
    pub decisions: Option<String>,
    /// What loading changed and the user should be told (e.g. a charter cut to the cap).
    pub notes: Vec<String>,
}

impl SquadTeam {
    /// Whether `other` is the same team: everything but the notes is equal.
    pub fn same_team(&self, other: &SquadTeam) -> bool {
        self.name == other.name
            && self.workers == other.workers
            && self.routing == other.routing
            && self.decisions == other.decisions
    }
}

/// Finds and loads the Squad folder of `repo_root`: `.squad/`, else the legacy `.ai-team/`.
///
/// Answers the folder and its team, or `None` when the repository has neither folder.
pub fn discover(repo_root: &Path) -> Result<Option<(PathBuf, SquadTeam)>> {
    for name in SQUAD_DIRS {
        let dir = repo_root.join(name);
        if dir.is_dir() {
            let team = load(&dir)?;
            return Ok(Some((dir, team)));
        }
    }
    Ok(None)
}

/// Loads the Squad folder `dir` (the `.squad/` folder itself).
///
/// Fails, naming the file and the 1-based line, when the folder or its `team.md` is missing,
/// `team.md` has no roster table, a row has the wrong number of cells, a member's name is not
/// a valid worker name once sanitized (lowercased, runs of other characters turned into `-`),
/// a member is listed twice or an effort is unknown. A charter over [`CHARTER_CAP`] characters
/// is cut, with a note.
pub fn load(dir: &Path) -> Result<SquadTeam> {
    check_folder(dir)?;
    let team_file = dir.join(TEAM_FILE);
    let text = read_text(dir, Path::new(TEAM_FILE))?.ok_or_else(|| {
        squad_error(
            &team_file,
            None,
            "missing: a Squad folder lists its members in team.md",
        )
    })?;
    let roster = parse_team(&text, &team_file)?;
    let mut notes = Vec::new();
    let workers = roster
        .members
        .into_iter()
        .map(|member| load_worker(dir, member, &mut notes))
        .collect::<Result<Vec<_>>>()?;
    Ok(SquadTeam {
        name: roster.name.unwrap_or_else(|| default_name(dir)),
        workers,
        routing: read_context(dir, ROUTING_FILE)?,
        decisions: read_context(dir, DECISIONS_FILE)?,
        notes,
    })
}

/// Writes `team` to the Squad folder `dir` (created when missing), in the format [`load`]
/// reads: `team.md`, `agents/<name>/charter.md` for each worker with a system prompt, and
/// `routing.md` / `decisions.md` when set.
///
/// The files written are overwritten; no other file is touched or deleted, so a charter,
/// `routing.md` or `decisions.md` left by an earlier save is still read back by [`load`].
/// Fails without writing anything when a worker's name would not read back as itself, two
/// workers share a name, there are no workers, or a system prompt is over [`CHARTER_CAP`].
pub fn save(dir: &Path, team: &SquadTeam) -> Result<()> {
    check_savable(dir, team)?;
    fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
    write_text(dir, Path::new(TEAM_FILE), &render_team(team))?;
    for worker in &team.workers {
        if let Some(prompt) = prompt_text(worker) {
            write_text(dir, &charter_path(&worker.name), &format!("{prompt}\n"))?;
        }
    }
    for (file, text) in [
        (ROUTING_FILE, &team.routing),
        (DECISIONS_FILE, &team.decisions),
    ] {
        if let Some(text) = non_empty(text.as_deref()) {
            write_text(dir, Path::new(file), &format!("{text}\n"))?;
        }
    }
    Ok(())
}

/// A member name as Squad folders spell it: lowercased, every run of characters other than
/// ASCII letters and digits turned into one `-`, no `-` at either end (`Code Reviewer` →
/// `code-reviewer`).
pub fn sanitize_name(raw: &str) -> String {
    let mut name = String::with_capacity(raw.len());
    for c in raw.to_lowercase().chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c);
        } else if !name.is_empty() && !name.ends_with('-') {
            name.push('-');
        }
    }
    while name.ends_with('-') {
        name.pop();
    }
    name
}

/// What is wrong with `name` as a worker name (a producerId segment: 3–64 characters of
/// `a-z`, `0-9` and `-`), or `None` when it is valid.
pub fn name_problem(name: &str) -> Option<String> {
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Some(format!("contains {c:?}"));
    }
    match name.len() {
        0 => Some("is empty".to_string()),
        len @ 1..=2 => Some(format!("is {len} characters long, fewer than 3")),
        len @ 65.. => Some(format!("is {len} characters long, more than 64")),
        _ => None,
    }
}

/// The role shown in `team.md` for a system prompt: its first sentence, without a leading
/// "You are a" / "You are an" / "You are" and the closing period.
pub fn derive_role(prompt: &str) -> String {
    let line = prompt.lines().map(str::trim).find(|l| !l.is_empty());
    let sentence = first_sentence(line.unwrap_or(""));
    let role = strip_you_are(sentence)
        .trim()
        .trim_end_matches('.')
        .trim_end();
    role.chars()
        .take(ROLE_CAP)
        .collect::<String>()
        .trim_end()
        .to_string()
}

// ----- reading -----

/// A roster row of `team.md`.
#[derive(Debug)]
struct Member {
    name: String,
    role: String,
    agent: Option<String>,
    model: Option<String>,
    effort: Option<Effort>,
}

/// What `team.md` says.
#[derive(Debug)]
struct Roster {
    name: Option<String>,
    members: Vec<Member>,
}

/// A column of the roster table.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Column {
    Member,
    Role,
    Agent,
    Model,
    Effort,
    Other,
}

impl Column {
    fn of(header: &str) -> Column {
        match header.trim().to_ascii_lowercase().as_str() {
            "member" | "name" => Column::Member,
            "role" => Column::Role,
            "agent" => Column::Agent,
            "model" => Column::Model,
            "effort" => Column::Effort,
            _ => Column::Other,
        }
    }
}

fn check_folder(dir: &Path) -> Result<()> {
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(squad_error(dir, None, "not a folder")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Err(squad_error(dir, None, "no Squad folder here"))
        }
        Err(e) => Err(io_error(dir, e)),
    }
}

/// `team.md`'s heading and roster.
fn parse_team(text: &str, file: &Path) -> Result<Roster> {
    let lines = visible_lines(text.strip_prefix('\u{feff}').unwrap_or(text));
    let mut name = None;
    for (i, &(number, line)) in lines.iter().enumerate() {
        if let Some(heading) = heading(line) {
            name = name.or(Some(heading));
        } else if let Some(columns) = roster_header(line) {
            let members = parse_rows(&lines[i + 1..], &columns, number, file)?;
            return Ok(Roster { name, members });
        }
    }
    Err(squad_error(
        file,
        None,
        "no roster table: a header row `| Member | Role |` followed by `|---|---|`",
    ))
}

/// The lines with their 1-based numbers, those of fenced code blocks blanked.
fn visible_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~");
        if fence {
            fenced = !fenced;
        }
        lines.push((i + 1, if fence || fenced { "" } else { line }));
    }
    lines
}

/// The text of a `# heading` (level 1 only).
fn heading(line: &str) -> Option<String> {
    let text = line
        .trim()
        .strip_prefix("# ")?
        .trim()
        .trim_end_matches('#')
        .trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// The columns of a roster header row: a table row with `Member` and `Role` columns.
fn roster_header(line: &str) -> Option<Vec<Column>> {
    let columns: Vec<Column> = split_row(line)?.iter().map(|c| Column::of(c)).collect();
    let has = |wanted| columns.contains(&wanted);
    (has(Column::Member) && has(Column::Role)).then_some(columns)
}

/// The members of the rows after a roster header on line `header_line`.
fn parse_rows(
    rows: &[(usize, &str)],
    columns: &[Column],
    header_line: usize,
    file: &Path,
) -> Result<Vec<Member>> {
    if !rows
        .first()
        .is_some_and(|&(_, line)| is_separator(line, columns.len()))
    {
        return Err(squad_error(
            file,
            Some(header_line + 1),
            format!(
                "the roster header is not followed by a separator row of {} cells like `|---|---|`",
                columns.len()
            ),
        ));
    }
    let mut members: Vec<(usize, Member)> = Vec::new();
    for &(number, line) in rows[1..].iter().take_while(|(_, l)| is_row(l)) {
        let member = parse_member(line, columns, number, file)?;
        if let Some((first, _)) = members.iter().find(|(_, m)| m.name == member.name) {
            return Err(squad_error(
                file,
                Some(number),
                format!(
                    "member `{}` is listed twice (first on line {first})",
                    member.name
                ),
            ));
        }
        members.push((number, member));
    }
    if members.is_empty() {
        return Err(squad_error(
            file,
            Some(header_line),
            "the roster lists no members",
        ));
    }
    Ok(members.into_iter().map(|(_, m)| m).collect())
}

fn is_row(line: &str) -> bool {
    line.trim_start().starts_with('|')
}

/// `|---|:---:|`, with `cells` cells.
fn is_separator(line: &str, cells: usize) -> bool {
    split_row(line).is_some_and(|row| {
        row.len() == cells
            && row
                .iter()
                .all(|c| c.contains('-') && c.chars().all(|ch| ch == '-' || ch == ':' || ch == ' '))
    })
}

/// The cells of a table row (`| a | b |`), trimmed, `\|` read as `|`; `None` for other lines.
fn split_row(line: &str) -> Option<Vec<String>> {
    let inner = line.trim().strip_prefix('|')?;
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cell.push('|');
                chars.next();
            }
            '|' => cells.push(std::mem::take(&mut cell).trim().to_string()),
            _ => cell.push(c),
        }
    }
    if !cell.trim().is_empty() {
        cells.push(cell.trim().to_string());
    }
    Some(cells)
}

/// The member of the roster row on line `number`.
fn parse_member(line: &str, columns: &[Column], number: usize, file: &Path) -> Result<Member> {
    let cells = split_row(line).unwrap_or_default();
    if cells.len() != columns.len() {
        return Err(squad_error(
            file,
            Some(number),
            format!(
                "the row has {} cells, the roster header {}",
                cells.len(),
                columns.len()
            ),
        ));
    }
    let cell = |wanted: Column| {
        columns
            .iter()
            .position(|c| *c == wanted)
            .and_then(|i| cells.get(i))
            .map(String::as_str)
            .filter(|c| !c.is_empty())
    };
    let raw = cell(Column::Member).unwrap_or("");
    let name = sanitize_name(raw);
    if let Some(problem) = name_problem(&name) {
        return Err(squad_error(
            file,
            Some(number),
            format!("member `{raw}` gives the name `{name}`, which {problem} ({NAME_RULE})"),
        ));
    }
    let effort = cell(Column::Effort)
        .map(|e| parse_effort(e).ok_or_else(|| unknown_effort(e, number, file)))
        .transpose()?;
    Ok(Member {
        name,
        role: cell(Column::Role).unwrap_or("").to_string(),
        agent: cell(Column::Agent).map(str::to_string),
        model: cell(Column::Model).map(str::to_string),
        effort,
    })
}

fn parse_effort(text: &str) -> Option<Effort> {
    serde_json::from_value(serde_json::Value::String(text.to_ascii_lowercase())).ok()
}

fn effort_name(effort: Effort) -> String {
    match serde_json::to_value(effort) {
        Ok(serde_json::Value::String(name)) => name,
        _ => String::new(),
    }
}

fn unknown_effort(text: &str, line: usize, file: &Path) -> Error {
    squad_error(
        file,
        Some(line),
        format!("unknown effort `{text}`; the efforts are low, medium, high and xhigh"),
    )
}

/// The worker of a roster member: its charter as system prompt, else its role.
fn load_worker(dir: &Path, member: Member, notes: &mut Vec<String>) -> Result<WorkerSpec> {
    let charter = read_text(dir, &charter_path(&member.name))?;
    let charter = non_empty(charter.as_deref()).map(|text| cap_charter(text, &member.name, notes));
    let mut worker = WorkerSpec::new(member.name);
    worker.agent = member.agent;
    worker.model = member.model;
    worker.effort = member.effort;
    worker.system_prompt = charter.or_else(|| role_prompt(&member.role));
    Ok(worker)
}

/// `agents/<name>/charter.md`, relative to the Squad folder.
fn charter_path(name: &str) -> PathBuf {
    Path::new(AGENTS_DIR).join(name).join(CHARTER_FILE)
}

/// The charter cut to [`CHARTER_CAP`] characters, with a note when it was longer.
fn cap_charter(text: &str, name: &str, notes: &mut Vec<String>) -> String {
    let count = text.chars().count();
    if count <= CHARTER_CAP {
        return text.to_string();
    }
    notes.push(format!(
        "{AGENTS_DIR}/{name}/{CHARTER_FILE}: cut to {CHARTER_CAP} characters (it has {count})"
    ));
    let cut: String = text.chars().take(CHARTER_CAP).collect();
    cut.trim_end().to_string()
}

/// "You are <role>.", or `None` for no role.
fn role_prompt(role: &str) -> Option<String> {
    let role = role.trim().trim_end_matches('.').trim_end();
    (!role.is_empty()).then(|| format!("You are {role}."))
}

/// `routing.md` or `decisions.md`, trimmed; `None` when missing or empty.
fn read_context(dir: &Path, file: &str) -> Result<Option<String>> {
    let text = read_text(dir, Path::new(file))?;
    Ok(non_empty(text.as_deref()).map(str::to_string))
}

/// The name of the folder holding the Squad folder, else "squad".
fn default_name(dir: &Path) -> String {
    dir.parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty())
        .unwrap_or(DEFAULT_TEAM_NAME)
        .to_string()
}

/// The file `dir/rel`, or `None` when it is missing. Refuses symbolic links on the way,
/// anything but a regular file and files over [`MAX_FILE_BYTES`].
fn read_text(dir: &Path, rel: &Path) -> Result<Option<String>> {
    let path = dir.join(rel);
    let Some(meta) = walk(dir, rel)? else {
        return Ok(None);
    };
    if !meta.is_file() {
        return Err(squad_error(&path, None, "not a regular file"));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(squad_error(
            &path,
            None,
            format!("{} bytes, more than the {MAX_FILE_BYTES} read", meta.len()),
        ));
    }
    fs::read_to_string(&path)
        .map(Some)
        .map_err(|e| io_error(&path, e))
}

/// The metadata of `dir/rel` (not following links), `None` when a part of it is missing;
/// fails when a part of `rel` is a symbolic link.
fn walk(dir: &Path, rel: &Path) -> Result<Option<fs::Metadata>> {
    let mut at = dir.to_path_buf();
    let mut last = None;
    for part in rel.components() {
        at.push(part);
        let meta = match fs::symlink_metadata(&at) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error(&at, e)),
        };
        if meta.file_type().is_symlink() {
            return Err(squad_error(
                &at,
                None,
                "a symbolic link; Squad files are used only when they are in the folder itself",
            ));
        }
        last = Some(meta);
    }
    Ok(last)
}

fn non_empty(text: Option<&str>) -> Option<&str> {
    text.map(str::trim).filter(|t| !t.is_empty())
}

// ----- writing -----

/// Everything that would not read back as written, before anything is written.
fn check_savable(dir: &Path, team: &SquadTeam) -> Result<()> {
    let team_file = dir.join(TEAM_FILE);
    if team.workers.is_empty() {
        return Err(squad_error(&team_file, None, "the team has no workers"));
    }
    for (i, worker) in team.workers.iter().enumerate() {
        check_worker_name(&worker.name, &team_file)?;
        if team.workers[..i].iter().any(|w| w.name == worker.name) {
            return Err(squad_error(
                &team_file,
                None,
                format!("two workers are named `{}`", worker.name),
            ));
        }
        check_prompt(dir, worker)?;
    }
    Ok(())
}

fn check_worker_name(name: &str, team_file: &Path) -> Result<()> {
    let problem = name_problem(name).or_else(|| {
        let read_back = sanitize_name(name);
        (read_back != name).then(|| format!("would read back as `{read_back}`"))
    });
    match problem {
        Some(problem) => Err(squad_error(
            team_file,
            None,
            format!("worker `{name}` cannot be a Squad member: its name {problem} ({NAME_RULE})"),
        )),
        None => Ok(()),
    }
}

fn check_prompt(dir: &Path, worker: &WorkerSpec) -> Result<()> {
    let count = prompt_text(worker).map_or(0, |p| p.chars().count());
    if count <= CHARTER_CAP {
        return Ok(());
    }
    Err(squad_error(
        &dir.join(charter_path(&worker.name)),
        None,
        format!("the system prompt has {count} characters, more than a charter's {CHARTER_CAP}"),
    ))
}

/// The system prompt written as the worker's charter, trimmed; `None` when there is none.
fn prompt_text(worker: &WorkerSpec) -> Option<&str> {
    non_empty(worker.system_prompt.as_deref())
}

/// `team.md`: the heading and the roster, with `Agent`, `Model` and `Effort` columns only
/// when some worker sets them.
fn render_team(team: &SquadTeam) -> String {
    let workers = &team.workers;
    let agent = workers.iter().any(|w| w.agent.is_some());
    let model = workers.iter().any(|w| w.model.is_some());
    let effort = workers.iter().any(|w| w.effort.is_some());
    let mut header = vec!["Member", "Role"];
    header.extend(agent.then_some("Agent"));
    header.extend(model.then_some("Model"));
    header.extend(effort.then_some("Effort"));
    let mut text = String::new();
    let name = one_line(&team.name);
    if !name.is_empty() {
        text.push_str(&format!("# {name}\n\n"));
    }
    text.push_str(&table_row(header.iter().map(|h| h.to_string())));
    text.push_str(&table_row(header.iter().map(|_| "---".to_string())));
    for worker in workers {
        let mut cells = vec![
            worker.name.clone(),
            prompt_text(worker).map(derive_role).unwrap_or_default(),
        ];
        cells.extend(agent.then(|| worker.agent.clone().unwrap_or_default()));
        cells.extend(model.then(|| worker.model.clone().unwrap_or_default()));
        cells.extend(effort.then(|| worker.effort.map(effort_name).unwrap_or_default()));
        text.push_str(&table_row(cells.into_iter()));
    }
    text
}

/// `| a | b |` and a newline, each cell on one line with `|` escaped.
fn table_row(cells: impl Iterator<Item = String>) -> String {
    let cells: Vec<String> = cells.map(|c| one_line(&c).replace('|', "\\|")).collect();
    format!("| {} |\n", cells.join(" | "))
}

/// The text with line breaks turned into spaces, trimmed.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r'])
        .collect::<Vec<_>>()
        .join(" ")
        .trim()
        .to_string()
}

/// The text up to the first ". " (or all of it).
fn first_sentence(line: &str) -> &str {
    line.find(". ").map_or(line, |end| &line[..end])
}

fn strip_you_are(sentence: &str) -> &str {
    for prefix in ["you are an ", "you are a ", "you are "] {
        let head = sentence.get(..prefix.len());
        if head.is_some_and(|h| h.eq_ignore_ascii_case(prefix)) {
            return &sentence[prefix.len()..];
        }
    }
    sentence
}

/// Writes `dir/rel`, creating its folders; refuses to write through a symbolic link.
fn write_text(dir: &Path, rel: &Path, text: &str) -> Result<()> {
    let path = dir.join(rel);
    walk(dir, rel)?;
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| io_error(parent, e))?;
    }
    fs::write(&path, text).map_err(|e| io_error(&path, e))
}

fn squad_error(file: &Path, line: Option<usize>, message: impl Into<String>) -> Error {
    Error::Squad {
        file: file.to_path_buf(),
        line,
        message: message.into(),
    }
}

fn io_error(path: &Path, source: io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn put(dir: &Path, rel: &str, text: &str) {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().expect("should succeed")).expect("should succeed");
        fs::write(path, text).expect("should succeed");
    }

    fn squad_parts(error: Error) -> (PathBuf, Option<usize>, String) {
        match error {
            Error::Squad {
                file,
                line,
                message,
            } => (file, line, message),
            other => panic!("not a Squad error: {other:?}"),
        }
    }

    fn load_error(team_md: &str) -> (PathBuf, Option<usize>, String) {
        let dir = tempfile::tempdir().expect("should succeed");
        put(dir.path(), "team.md", team_md);
        squad_parts(load(dir.path()).expect_err("should fail"))
    }

    fn worker(name: &str, prompt: Option<&str>) -> WorkerSpec {
        let mut w = WorkerSpec::new(name);
        w.system_prompt = prompt.map(str::to_string);
        w
    }

    const SEED_TEAM: &str = "# Code Review Team\n\nWe review code.\n\n## Members\n\n\
        | Member | Role |\n|--------|------|\n\
        | Alice | Security reviewer |\n| Bob | Performance reviewer |\n";

    #[test]
    fn seed_mapping_reads_roster_charters_routing_and_decisions() {
        let repo = tempfile::tempdir().expect("should succeed");
        let squad = repo.path().join(".squad");
        put(&squad, "team.md", SEED_TEAM);
        put(
            &squad,
            "agents/alice/charter.md",
            "\nYou are a security reviewer.\nLook for injection.\n\n",
        );
        put(&squad, "routing.md", "Security questions go to alice.\n");
        put(&squad, "decisions.md", "\nWe use Rust 2021.\n\n");
        let (dir, team) = discover(repo.path())
            .expect("should succeed")
            .expect("should succeed");
        assert_eq!(dir, squad);
        assert_eq!(team.name, "Code Review Team");
        assert_eq!(team.workers.len(), 2);
        assert_eq!(team.workers[0].name, "alice");
        assert_eq!(
            team.workers[0].system_prompt.as_deref(),
            Some("You are a security reviewer.\nLook for injection.")
        );
        assert_eq!(team.workers[1].name, "bob");
        assert_eq!(
            team.workers[1].system_prompt.as_deref(),
            Some("You are Performance reviewer.")
        );
        assert_eq!(
            team.routing.as_deref(),
            Some("Security questions go to alice.")
        );
        assert_eq!(team.decisions.as_deref(), Some("We use Rust 2021."));
        assert!(team.notes.is_empty());
    }

    #[test]
    fn legacy_ai_team_is_discovered_when_squad_is_absent() {
        let repo = tempfile::tempdir().expect("should succeed");
        put(&repo.path().join(".ai-team"), "team.md", SEED_TEAM);
        let (dir, team) = discover(repo.path())
            .expect("should succeed")
            .expect("should succeed");
        assert_eq!(dir, repo.path().join(".ai-team"));
        assert_eq!(team.workers[0].name, "alice");
    }

    #[test]
    fn squad_is_preferred_over_ai_team() {
        let repo = tempfile::tempdir().expect("should succeed");
        put(&repo.path().join(".ai-team"), "team.md", SEED_TEAM);
        put(
            &repo.path().join(".squad"),
            "team.md",
            "| Role | Member |\n|---|---|\n| lead | Carol |\n",
        );
        let (dir, team) = discover(repo.path())
            .expect("should succeed")
            .expect("should succeed");
        assert_eq!(dir, repo.path().join(".squad"));
        assert_eq!(team.workers.len(), 1);
        assert_eq!(team.workers[0].name, "carol");
    }

    #[test]
    fn discover_answers_none_without_a_squad_folder() {
        let repo = tempfile::tempdir().expect("should succeed");
        assert!(discover(repo.path()).expect("should succeed").is_none());
    }

    #[test]
    fn byte_order_mark_and_crlf_are_accepted() {
        let dir = tempfile::tempdir().expect("should succeed");
        put(
            dir.path(),
            "team.md",
            "\u{feff}# Ops\r\n\r\n| Member | Role |\r\n|---|---|\r\n| alice | on call |\r\n",
        );
        let team = load(dir.path()).expect("should succeed");
        assert_eq!(team.name, "Ops");
        assert_eq!(
            team.workers[0].system_prompt.as_deref(),
            Some("You are on call.")
        );
    }

    #[test]
    fn team_name_defaults_to_the_repository_folder() {
        let repo = tempfile::tempdir().expect("should succeed");
        let root = repo.path().join("my-repo");
        put(
            &root.join(".squad"),
            "team.md",
            "| Member | Role |\n|-|-|\n| bob | |\n",
        );
        let team = load(&root.join(".squad")).expect("should succeed");
        assert_eq!(team.name, "my-repo");
        assert_eq!(team.workers[0].system_prompt, None);
        assert_eq!(default_name(Path::new(".squad")), "squad");
    }

    #[test]
    fn member_names_are_sanitized() {
        assert_eq!(sanitize_name("Code Reviewer"), "code-reviewer");
        assert_eq!(sanitize_name("  **Dr. Ops__Bot!** "), "dr-ops-bot");
        assert_eq!(sanitize_name("Zoë"), "zo");
        let dir = tempfile::tempdir().expect("should succeed");
        put(
            dir.path(),
            "team.md",
            "| Member | Role |\n|---|---|\n| Code Reviewer | reviews code |\n",
        );
        put(dir.path(), "agents/code-reviewer/charter.md", "Review it.");
        let team = load(dir.path()).expect("should succeed");
        assert_eq!(team.workers[0].name, "code-reviewer");
        assert_eq!(team.workers[0].system_prompt.as_deref(), Some("Review it."));
    }

    #[test]
    fn invalid_member_name_names_its_line() {
        let (file, line, message) =
            load_error("# T\n| Member | Role |\n|---|---|\n| alice | a |\n| Al | b |\n");
        assert!(file.ends_with("team.md"));
        assert_eq!(line, Some(5));
        assert!(message.contains("`al`"), "{message}");
        assert!(message.contains("fewer than 3"), "{message}");
    }

    #[test]
    fn extra_columns_are_read_in_any_order_and_case() {
        let dir = tempfile::tempdir().expect("should succeed");
        put(
            dir.path(),
            "team.md",
            "| EFFORT | model | Member | Notes | Role | Agent |\n\
             |:--|:-:|--|--|--|--:|\n\
             | High | sonnet | alice | x | lead | claude |\n\
             |  |  | bob | y | helper |  |\n",
        );
        let team = load(dir.path()).expect("should succeed");
        let alice = &team.workers[0];
        assert_eq!(alice.effort, Some(Effort::High));
        assert_eq!(alice.model.as_deref(), Some("sonnet"));
        assert_eq!(alice.agent.as_deref(), Some("claude"));
        let bob = &team.workers[1];
        assert_eq!(
            (bob.effort, bob.model.as_deref(), bob.agent.as_deref()),
            (None, None, None)
        );
    }

    #[test]
    fn unknown_effort_names_its_line() {
        let (_, line, message) =
            load_error("| Member | Role | Effort |\n|---|---|---|\n| alice | a | max |\n");
        assert_eq!(line, Some(3));
        assert!(message.contains("unknown effort `max`"), "{message}");
    }

    #[test]
    fn charter_over_the_cap_is_cut_with_a_note() {
        let dir = tempfile::tempdir().expect("should succeed");
        put(
            dir.path(),
            "team.md",
            "| Member | Role |\n|---|---|\n| bob | b |\n",
        );
        let long = "é".repeat(CHARTER_CAP + 10);
        put(dir.path(), "agents/bob/charter.md", &long);
        let team = load(dir.path()).expect("should succeed");
        let prompt = team.workers[0]
            .system_prompt
            .as_deref()
            .expect("should succeed");
        assert_eq!(prompt.chars().count(), CHARTER_CAP);
        assert_eq!(
            team.notes,
            vec![format!(
                "agents/bob/charter.md: cut to 4000 characters (it has {})",
                CHARTER_CAP + 10
            )]
        );
    }

    #[test]
    fn charter_at_the_cap_is_kept_whole() {
        let dir = tempfile::tempdir().expect("should succeed");
        put(
            dir.path(),
            "team.md",
            "| Member | Role |\n|---|---|\n| bob | b |\n",
        );
        put(
            dir.path(),
            "agents/bob/charter.md",
            &"x".repeat(CHARTER_CAP),
        );
        let team = load(dir.path()).expect("should succeed");
        assert_eq!(
            team.workers[0]
                .system_prompt
                .as_ref()
                .expect("should succeed")
                .len(),
            CHARTER_CAP
        );
        assert!(team.notes.is_empty());
    }

    #[test]
    fn malformed_row_names_its_line() {
        let (file, line, message) = load_error(
            "# Team\n\n| Member | Role |\n|---|---|\n| alice | a |\n| bob | b | extra |\n",
        );
        assert!(file.ends_with("team.md"));
        assert_eq!(line, Some(6));
        assert!(message.contains("3 cells"), "{message}");
        let shown = load(Path::new("/nowhere"))
            .expect_err("should fail")
            .to_string();
        assert!(shown.contains("no Squad folder here"), "{shown}");
    }

    #[test]
    fn error_display_shows_file_and_line() {
        let dir = tempfile::tempdir().expect("should succeed");
        put(
            dir.path(),
            "team.md",
            "| Member | Role |\n|---|---|\n| a | b | c |\n",
        );
        let shown = load(dir.path()).expect_err("should fail").to_string();
        assert!(shown.contains("team.md:3: "), "{shown}");
    }

    #[test]
    fn header_without_separator_names_the_next_line() {
        let (_, line, message) = load_error("| Member | Role |\n| alice | a |\n");
        assert_eq!(line, Some(2));
        assert!(message.contains("separator"), "{message}");
    }

    #[test]
    fn missing_team_md_names_the_file() {
        let dir = tempfile::tempdir().expect("should succeed");
        let (file, line, _) = squad_parts(load(dir.path()).expect_err("should fail"));
        assert_eq!(file, dir.path().join("team.md"));
        assert_eq!(line, None);
    }

    #[test]
    fn missing_folder_is_an_error() {
        let dir = tempfile::tempdir().expect("should succeed");
        let gone = dir.path().join(".squad");
        let (file, line, message) = squad_parts(load(&gone).expect_err("should fail"));
        assert_eq!((file, line), (gone, None));
        assert_eq!(message, "no Squad folder here");
    }

    #[test]
    fn no_roster_table_is_an_error() {
        let (file, line, message) =
            load_error("# Team\n\n| Name | Charter |\n|---|---|\n| x | y |\n");
        assert!(file.ends_with("team.md"));
        assert_eq!(line, None);
        assert!(message.contains("no roster table"), "{message}");
    }

    #[test]
    fn table_in_a_code_fence_is_not_the_roster() {
        let (_, _, message) = load_error("```\n| Member | Role |\n|---|---|\n| alice | a |\n```\n");
        assert!(message.contains("no roster table"), "{message}");
    }

    #[test]
    fn empty_roster_is_an_error() {
        let (_, line, message) = load_error("\n| Member | Role |\n|---|---|\n\n| alice | a |\n");
        assert_eq!(line, Some(2));
        assert!(message.contains("no members"), "{message}");
    }

    #[test]
    fn duplicate_member_names_its_line() {
        let (_, line, message) =
            load_error("| Member | Role |\n|---|---|\n| Alice | a |\n| bob | b |\n| ALICE | c |\n");
        assert_eq!(line, Some(5));
        assert!(
            message.contains("`alice` is listed twice (first on line 3)"),
            "{message}"
        );
    }

    #[test]
    fn escaped_pipes_are_read_as_pipes() {
        assert_eq!(
            split_row(r"| a \| b | c |").expect("should succeed"),
            vec!["a | b".to_string(), "c".to_string()]
        );
        assert_eq!(
            split_row("| a |  |").expect("should succeed"),
            vec!["a", ""]
        );
        assert_eq!(split_row("not a row"), None);
    }

    #[cfg(unix)]
    #[test]
    fn symlinked_charter_is_refused() {
        let dir = tempfile::tempdir().expect("should succeed");
        put(dir.path(), "secret.txt", "secret");
        put(
            dir.path(),
            "squad/team.md",
            "| Member | Role |\n|---|---|\n| bob | b |\n",
        );
        fs::create_dir_all(dir.path().join("squad/agents/bob")).expect("should succeed");
        std::os::unix::fs::symlink(
            dir.path().join("secret.txt"),
            dir.path().join("squad/agents/bob/charter.md"),
        )
        .expect("should succeed");
        let (file, _, message) =
            squad_parts(load(&dir.path().join("squad")).expect_err("should fail"));
        assert!(file.ends_with("agents/bob/charter.md"));
        assert!(message.contains("symbolic link"), "{message}");
        let team = SquadTeam {
            name: "t".into(),
            workers: vec![worker("bob", Some("overwrite"))],
            ..SquadTeam::default()
        };
        assert!(save(&dir.path().join("squad"), &team).is_err());
        assert_eq!(
            fs::read_to_string(dir.path().join("secret.txt")).expect("should succeed"),
            "secret"
        );
    }

    #[test]
    fn roles_are_derived_from_the_first_sentence() {
        assert_eq!(
            derive_role("You are a code reviewer. You look for bugs."),
            "code reviewer"
        );
        assert_eq!(derive_role("You are an architect."), "architect");
        assert_eq!(derive_role("you are Lead"), "Lead");
        assert_eq!(derive_role("\nWrites docs.\nMore."), "Writes docs");
        assert_eq!(derive_role("v1.2 expert. Yes."), "v1.2 expert");
    }

    #[test]
    fn save_writes_the_seed_format() {
        let dir = tempfile::tempdir().expect("should succeed");
        let team = SquadTeam {
            name: "Docs".into(),
            workers: vec![
                worker("writer", Some("You are a technical writer. You write.")),
                worker("editor", None),
            ],
            routing: None,
            decisions: Some("Use British spelling.".into()),
            notes: vec![],
        };
        save(dir.path(), &team).expect("should succeed");
        assert_eq!(
            fs::read_to_string(dir.path().join("team.md")).expect("should succeed"),
            "# Docs\n\n| Member | Role |\n| --- | --- |\n| writer | technical writer |\n| editor |  |\n"
        );
        assert_eq!(
            fs::read_to_string(dir.path().join("agents/writer/charter.md"))
                .expect("should succeed"),
            "You are a technical writer. You write.\n"
        );
        assert!(!dir.path().join("agents/editor").exists());
        assert!(!dir.path().join("routing.md").exists());
        assert!(load(dir.path()).expect("should succeed").same_team(&team));
    }

    #[test]
    fn round_trip_with_extra_columns() {
        let dir = tempfile::tempdir().expect("should succeed");
        let mut alice = worker("alice", Some("You are a | pipe | lover.\nLine two."));
        alice.agent = Some("claude".into());
        alice.effort = Some(Effort::Xhigh);
        let mut bob = worker("bob-2", None);
        bob.model = Some("gpt-5".into());
        let team = SquadTeam {
            name: "Team X".into(),
            workers: vec![alice, bob],
            routing: Some("Route by topic.\n\nAlways.".into()),
            decisions: Some("Decided.".into()),
            notes: vec!["not compared".into()],
        };
        save(dir.path(), &team).expect("should succeed");
        let text = fs::read_to_string(dir.path().join("team.md")).expect("should succeed");
        assert!(
            text.contains("| Member | Role | Agent | Model | Effort |"),
            "{text}"
        );
        assert!(
            text.contains(r"| alice | \| pipe \| lover | claude |  | xhigh |"),
            "{text}"
        );
        let back = load(dir.path()).expect("should succeed");
        assert!(back.same_team(&team), "{back:?}");
        assert!(back.notes.is_empty());
        save(dir.path(), &back).expect("should succeed");
        assert!(load(dir.path()).expect("should succeed").same_team(&team));
    }

    #[test]
    fn save_refuses_what_would_not_read_back() {
        let dir = tempfile::tempdir().expect("should succeed");
        let mut team = SquadTeam {
            name: "t".into(),
            workers: vec![worker("../evil", None)],
            ..SquadTeam::default()
        };
        let (_, _, message) = squad_parts(save(dir.path(), &team).expect_err("should fail"));
        assert!(message.contains("`../evil`"), "{message}");
        team.workers = vec![worker("a--b", None)];
        let (_, _, message) = squad_parts(save(dir.path(), &team).expect_err("should fail"));
        assert!(message.contains("read back as `a-b`"), "{message}");
        team.workers = vec![worker("abc", None), worker("abc", None)];
        assert!(save(dir.path(), &team).is_err());
        team.workers = vec![worker("abc", Some(&"x".repeat(CHARTER_CAP + 1)))];
        let (file, _, _) = squad_parts(save(dir.path(), &team).expect_err("should fail"));
        assert!(file.ends_with("agents/abc/charter.md"));
        team.workers = vec![];
        assert!(save(dir.path(), &team).is_err());
        assert!(fs::read_dir(dir.path())
            .expect("should succeed")
            .next()
            .is_none());
    }

    fn effort() -> impl Strategy<Value = Effort> {
        prop_oneof![
            Just(Effort::Low),
            Just(Effort::Medium),
            Just(Effort::High),
            Just(Effort::Xhigh),
        ]
    }

    fn text() -> impl Strategy<Value = String> {
        "[A-Za-z0-9]([A-Za-z0-9 .,:;!?'|\n-]{0,60}[A-Za-z0-9.])?"
    }

    fn arb_worker(name: String) -> impl Strategy<Value = WorkerSpec> {
        (
            proptest::option::of("[a-z]{3,8}"),
            proptest::option::of("[a-z0-9][a-z0-9.-]{0,10}"),
            proptest::option::of(effort()),
            proptest::option::of(text()),
        )
            .prop_map(move |(agent, model, effort, prompt)| {
                let mut w = WorkerSpec::new(name.clone());
                w.agent = agent;
                w.model = model;
                w.effort = effort;
                w.system_prompt = prompt;
                w
            })
    }

    fn arb_team() -> impl Strategy<Value = SquadTeam> {
        let names = proptest::collection::btree_set("[a-z][a-z0-9]{2,8}(-[a-z0-9]{1,4})?", 1..=6);
        let workers =
            names.prop_flat_map(|names| names.into_iter().map(arb_worker).collect::<Vec<_>>());
        (
            "[A-Za-z]([A-Za-z0-9 _-]{0,20}[A-Za-z0-9])?",
            workers,
            proptest::option::of(text()),
            proptest::option::of(text()),
        )
            .prop_map(|(name, workers, routing, decisions)| SquadTeam {
                name,
                workers,
                routing,
                decisions,
                notes: vec![],
            })
    }

    proptest! {
        #[test]
        fn save_then_load_is_the_same_team(team in arb_team()) {
            let dir = tempfile::tempdir().expect("should succeed");
            save(dir.path(), &team).expect("should succeed");
            let back = load(dir.path()).expect("should succeed");
            prop_assert!(back.same_team(&team), "{:?}\n!=\n{:?}", back, team);
            prop_assert!(back.notes.is_empty());
        }
    }
}
