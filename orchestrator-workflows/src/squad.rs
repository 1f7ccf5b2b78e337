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
    if name.is_empty() {
        return Some("is empty".to_string());
    }
    orchestrator_core::plan::producer_id_problem(name)
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
mod tests;
