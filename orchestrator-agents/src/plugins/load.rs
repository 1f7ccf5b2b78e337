//! Where plugins load from ([`PluginPlaces`]) and how a plugin folder is read, safely: every
//! file stays inside its plugin folder (symbolic links leading out are refused) and none is
//! larger than [`MAX_FILE_BYTES`].

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::parse::{self, bad};
use super::{Origin, Plugin, Plugins};
use crate::error::Error;

/// The largest plugin file read: 256 KiB.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// The manifest's file name.
const MANIFEST: &str = "plugin.json";

/// One place plugins load from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    origin: Origin,
    dir: PathBuf,
    /// A `--plugins DIR` must exist; the standard places may not.
    required: bool,
}

/// The places plugins load from, in order (the first of a name wins).
///
/// ```
/// use orchestrator_agents::plugins::PluginPlaces;
/// let places = PluginPlaces::new().repo("/work/repo").user("/home/me/.config/orchestrator/plugins");
/// assert_eq!(places.dirs().count(), 2);
/// assert_eq!(
///     PluginPlaces::user_dir(Some("/home/me".as_ref()), None),
///     Some("/home/me/.config/orchestrator/plugins".into())
/// );
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginPlaces {
    places: Vec<Place>,
}

impl PluginPlaces {
    /// No places.
    pub fn new() -> Self {
        PluginPlaces::default()
    }

    /// The standard places: the repository's `.orchestrator/plugins/` (when `repo` is given),
    /// then the user's ([`PluginPlaces::user_dir`] of `$HOME` and `$XDG_CONFIG_HOME`); add the
    /// `--plugins` folders with [`PluginPlaces::dir`].
    pub fn standard(repo: Option<&Path>) -> Self {
        let mut places = PluginPlaces::new();
        if let Some(repo) = repo {
            places = places.repo(repo);
        }
        let home = std::env::var_os("HOME");
        let xdg = std::env::var_os("XDG_CONFIG_HOME");
        match Self::user_dir(home.as_deref(), xdg.as_deref()) {
            Some(dir) => places.user(dir),
            None => places,
        }
    }

    /// The user's plugin folder: `$XDG_CONFIG_HOME/orchestrator/plugins` when that is set to an
    /// absolute path, else `$HOME/.config/orchestrator/plugins`; none without either.
    pub fn user_dir(home: Option<&OsStr>, xdg_config_home: Option<&OsStr>) -> Option<PathBuf> {
        let xdg = xdg_config_home
            .filter(|x| !x.is_empty())
            .map(PathBuf::from)
            .filter(|x| x.is_absolute());
        let config = match xdg {
            Some(x) => x,
            None => PathBuf::from(home.filter(|h| !h.is_empty())?).join(".config"),
        };
        Some(config.join("orchestrator").join("plugins"))
    }

    /// Adds `<repo>/.orchestrator/plugins/` (a folder of plugins; missing is fine).
    pub fn repo(mut self, repo: impl AsRef<Path>) -> Self {
        self.places.push(Place {
            origin: Origin::Repo,
            dir: repo.as_ref().join(".orchestrator").join("plugins"),
            required: false,
        });
        self
    }

    /// Adds the user's folder of plugins (missing is fine).
    pub fn user(mut self, dir: impl Into<PathBuf>) -> Self {
        self.places.push(Place {
            origin: Origin::User,
            dir: dir.into(),
            required: false,
        });
        self
    }

    /// Adds a `--plugins DIR`: a plugin folder (it holds `plugin.json`) or a folder of
    /// plugins. It must exist.
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.places.push(Place {
            origin: Origin::Flag,
            dir: dir.into(),
            required: true,
        });
        self
    }

    /// The folders, in order.
    pub fn dirs(&self) -> impl Iterator<Item = &Path> {
        self.places.iter().map(|p| p.dir.as_path())
    }

    /// Loads every plugin of every place. Errors name the file and field at fault.
    pub fn load(&self) -> Result<Plugins, Error> {
        let mut plugins = Plugins::default();
        let mut seen = BTreeSet::new();
        for place in &self.places {
            for dir in plugin_dirs(place)? {
                let plugin = read_plugin(&dir, place.origin)?;
                if !seen.insert(plugin.dir.clone()) {
                    continue;
                }
                add(&mut plugins, plugin);
            }
        }
        check_skills(&plugins)?;
        Ok(plugins)
    }
}

/// The plugin folders of `place`, sorted by name.
fn plugin_dirs(place: &Place) -> Result<Vec<PathBuf>, Error> {
    let dir = &place.dir;
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !place.required => {
            return Ok(Vec::new())
        }
        Err(source) => {
            return Err(Error::PluginRead {
                path: dir.clone(),
                source,
            })
        }
        Ok(m) if !m.is_dir() => {
            return Err(bad(
                dir,
                None,
                None,
                "is not a folder (a plugin, or a folder of plugins)",
            ))
        }
        Ok(_) => {}
    }
    if place.origin == Origin::Flag && dir.join(MANIFEST).exists() {
        return Ok(vec![dir.clone()]);
    }
    let mut dirs = Vec::new();
    for entry in read_dir(dir)? {
        let hidden = entry
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if hidden || !entry.is_dir() {
            continue;
        }
        if !entry.join(MANIFEST).exists() {
            return Err(bad(
                &entry,
                None,
                None,
                format!("is not a plugin: it has no {MANIFEST} (remove it, or add one with at least a `name`)"),
            ));
        }
        dirs.push(entry);
    }
    if dirs.is_empty() && place.origin == Origin::Flag {
        return Err(bad(
            dir,
            None,
            None,
            format!("holds no plugin (no {MANIFEST}, no folder with one)"),
        ));
    }
    Ok(dirs)
}

/// The entries of `dir`, sorted.
fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let read = |source| Error::PluginRead {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries = std::fs::read_dir(dir)
        .map_err(read)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(read)?;
    entries.sort();
    Ok(entries)
}

/// `path` checked to lead (through any symbolic links) inside `root` (canonical).
fn inside(root: &Path, path: &Path) -> Result<PathBuf, Error> {
    let real = std::fs::canonicalize(path).map_err(|source| Error::PluginRead {
        path: path.to_path_buf(),
        source,
    })?;
    if !real.starts_with(root) {
        return Err(bad(
            path,
            None,
            None,
            format!(
                "is a symbolic link leading outside its plugin folder {} (to {})",
                root.display(),
                real.display()
            ),
        ));
    }
    Ok(real)
}

/// The text of `path`, checked to be inside `root`, at most [`MAX_FILE_BYTES`] and UTF-8.
fn read_text(root: &Path, path: &Path) -> Result<String, Error> {
    let real = inside(root, path)?;
    let failed = |source| Error::PluginRead {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(&real).map_err(failed)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(bad(
            path,
            None,
            None,
            format!(
                "is larger than {} KiB, the most a plugin file may be",
                MAX_FILE_BYTES / 1024
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|e| bad(path, None, None, format!("is not UTF-8 text: {e}")))
}

/// Reads the plugin folder `dir`.
fn read_plugin(dir: &Path, origin: Origin) -> Result<Plugin, Error> {
    let root = std::fs::canonicalize(dir).map_err(|source| Error::PluginRead {
        path: dir.to_path_buf(),
        source,
    })?;
    let manifest_file = dir.join(MANIFEST);
    let manifest = parse::manifest(&manifest_file, &read_text(&root, &manifest_file)?)?;

    let mut agents = Vec::new();
    let agents_dir = dir.join("agents");
    if agents_dir.exists() {
        inside(&root, &agents_dir)?;
        for file in read_dir(&agents_dir)? {
            let is_agent = file
                .file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(".agent.md"));
            if !is_agent || file.is_dir() {
                continue;
            }
            let agent = parse::agent(&file, &read_text(&root, &file)?)?;
            if let Some(first) = agents
                .iter()
                .find(|a: &&super::PluginAgent| a.name == agent.name)
            {
                return Err(bad(
                    &file,
                    Some("name"),
                    None,
                    format!(
                        "the agent `{}` is defined twice in plugin `{}` (also in {})",
                        agent.name,
                        manifest.name,
                        first.file.display()
                    ),
                ));
            }
            agents.push(agent);
        }
    }

    let mut skills: Vec<super::Skill> = Vec::new();
    let skills_dir = dir.join("skills");
    if skills_dir.exists() {
        inside(&root, &skills_dir)?;
        for skill_dir in read_dir(&skills_dir)? {
            if !skill_dir.is_dir() {
                continue;
            }
            inside(&root, &skill_dir)?;
            let file = skill_dir.join("SKILL.md");
            if !file.exists() {
                return Err(bad(
                    &skill_dir,
                    None,
                    None,
                    "a skill folder must hold a SKILL.md",
                ));
            }
            let skill = parse::skill(&file, &read_text(&root, &file)?)?;
            if let Some(first) = skills.iter().find(|s| s.name == skill.name) {
                return Err(bad(
                    &file,
                    Some("name"),
                    None,
                    format!(
                        "the skill `{}` is defined twice in plugin `{}` (also in {})",
                        skill.name,
                        manifest.name,
                        first.file.display()
                    ),
                ));
            }
            skills.push(skill);
        }
    }

    let mcp_file = dir.join(".mcp.json");
    let mut mcp_servers = if mcp_file.exists() {
        parse::mcp(&mcp_file, &read_text(&root, &mcp_file)?, &root)?
    } else {
        Vec::new()
    };
    mcp_servers.sort_by(|a, b| a.name.cmp(&b.name));

    Ok(Plugin {
        name: manifest.name,
        description: manifest.description,
        version: manifest.version,
        dir: root,
        origin,
        agents,
        skills,
        mcp_servers,
    })
}

/// Adds `plugin` to `plugins`: its agents and servers whose names are not taken yet.
fn add(plugins: &mut Plugins, plugin: Plugin) {
    let at = |p: &Plugin| format!("plugin `{}` ({}, {})", p.name, p.origin, p.dir.display());
    if let Some(first) = plugins.plugins.iter().find(|p| p.name == plugin.name) {
        plugins.notes.push(format!(
            "{} is left out: {} has its name and loaded first",
            at(&plugin),
            at(first)
        ));
        return;
    }
    let index = plugins.plugins.len();
    for (a, agent) in plugin.agents.iter().enumerate() {
        match plugins.agents.get(&agent.name) {
            Some(&(p, _)) => plugins.notes.push(format!(
                "agent `{}` of {} is left out: {} defines it and loaded first",
                agent.name,
                at(&plugin),
                at(&plugins.plugins[p])
            )),
            None => {
                plugins.agents.insert(agent.name.clone(), (index, a));
            }
        }
    }
    let taken: BTreeMap<&str, usize> = plugins
        .servers
        .iter()
        .map(|&(p, s)| (plugins.plugins[p].mcp_servers[s].name.as_str(), p))
        .collect();
    let mut added = Vec::new();
    for (s, server) in plugin.mcp_servers.iter().enumerate() {
        match taken.get(server.name.as_str()) {
            Some(&p) => plugins.notes.push(format!(
                "MCP server `{}` of {} is left out: {} defines it and loaded first",
                server.name,
                at(&plugin),
                at(&plugins.plugins[p])
            )),
            None => added.push((index, s)),
        }
    }
    plugins.servers.extend(added);
    plugins.plugins.push(plugin);
}

/// Every skill an agent in effect names exists.
fn check_skills(plugins: &Plugins) -> Result<(), Error> {
    for (plugin, agent) in plugins.agents() {
        for name in &agent.skills {
            if plugins.find_skill(plugin, name).is_none() {
                return Err(bad(
                    &agent.file,
                    Some("skills"),
                    agent.skills_line,
                    format!(
                        "no skill `{name}` in plugin `{}` or another loaded plugin",
                        plugin.name
                    ),
                ));
            }
        }
    }
    Ok(())
}
