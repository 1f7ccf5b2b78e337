//! In-memory merges, commits in worktrees, and diff statistics.

use std::collections::BTreeSet;
use std::path::Path;

use git2::build::CheckoutBuilder;
use git2::{Index, IndexAddOption, IndexEntry, IndexTime, Oid, Repository, Signature, Tree};
use orchestrator_core::git::{DiffStats, GitError};

use crate::error::Context;
use crate::{checkout, tree_merge};

/// What merging one commit into another gives.
pub(crate) enum Step {
    /// The commit is already contained.
    Contained,
    /// The result is this commit (a fast-forward or a new merge commit).
    Moved(Oid),
    /// These paths conflict (sorted).
    Conflict(Vec<String>),
}

/// Merges `theirs` into `ours` in memory. A fast-forward when `fast_forward` allows it, else a
/// two-parent merge commit (`ours` first) that no ref points at yet.
///
/// The history is walked through `walk`, a handle on the same repository (or `repo` itself).
/// libgit2 caches an object either parsed or as its raw bytes, and the walk reads raw ones: on
/// a handle that parsed the commits (as merging does), it reads each from disk again, so a
/// branch that took k merges made the next merge read 2k loose commits. A handle kept only for
/// walks keeps them cached.
pub(crate) fn merge_step(
    repo: &Repository,
    walk: &Repository,
    ours: Oid,
    theirs: Oid,
    fast_forward: bool,
    signature: &Signature<'_>,
    message: &str,
) -> Result<Step, GitError> {
    // One walk of the history answers all three questions (libgit2's `graph_descendant_of`
    // is a merge-base walk too): `theirs` is already in `ours` when it is their merge base,
    // `ours` can move to `theirs` when `ours` is, and else the tree merge starts from it.
    let bases = tree_merge::merge_bases(walk, ours, theirs).ctx("merge")?;
    if ours == theirs || bases == [theirs] {
        return Ok(Step::Contained);
    }
    if fast_forward && bases == [ours] {
        return Ok(Step::Moved(theirs));
    }
    let (o, t) = (
        repo.find_commit(ours).ctx("merge")?,
        repo.find_commit(theirs).ctx("merge")?,
    );
    // Most merges are decided by the trees alone (see `tree_merge`); the rest by libgit2.
    let tree_id = match tree_merge::merged_tree(repo, &o, &t, &bases).ctx("merge")? {
        Some(tree) => tree,
        None => {
            let mut index = repo.merge_commits(&o, &t, None).ctx("merge")?;
            if index.has_conflicts() {
                return Ok(Step::Conflict(conflict_paths(&index)?));
            }
            index.write_tree_to(repo).ctx("write merged tree")?
        }
    };
    let tree = repo.find_tree(tree_id).ctx("write merged tree")?;
    let id = repo
        .commit(None, signature, signature, message, &tree, &[&o, &t])
        .ctx("commit merge")?;
    Ok(Step::Moved(id))
}

/// The conflicting paths of a merge index, sorted.
fn conflict_paths(index: &Index) -> Result<Vec<String>, GitError> {
    let mut paths = BTreeSet::new();
    for conflict in index.conflicts().ctx("read conflicts")? {
        let conflict = conflict.ctx("read conflicts")?;
        let sides: Vec<&IndexEntry> = [&conflict.our, &conflict.their]
            .into_iter()
            .flatten()
            .collect();
        let sides = if sides.is_empty() {
            conflict.ancestor.iter().collect()
        } else {
            sides
        };
        for entry in sides {
            paths.insert(String::from_utf8_lossy(&entry.path).into_owned());
        }
    }
    Ok(paths.into_iter().collect())
}

/// Stages everything in the worktree (respecting `.gitignore`) and commits it on its detached
/// HEAD. `None` when the tree did not change.
///
/// The tree is written through `objects`, a handle on the same object database (the main
/// repository's, kept open): after writing it libgit2 reads the whole tree back to rebuild the
/// index's tree cache, and a kept handle's object cache already holds the folders that did
/// not change, where the worktree's own handle, opened for this commit, would read each of
/// them from disk.
pub(crate) fn commit_all(
    wt: &Repository,
    objects: &Repository,
    signature: &Signature<'_>,
    message: &str,
) -> Result<Option<Oid>, GitError> {
    let mut index = crate::repos::current_index(wt)?;
    let root = workdir(wt)?.to_path_buf();
    // Nested repositories are skipped by `add_all` (which would fail on them or store a
    // gitlink) and staged as plain files afterwards; see `nested`.
    let mut nested = Vec::new();
    let probe = wt.index().ctx("read index")?;
    let mut skip_nested = |path: &Path, _: &[u8]| -> i32 {
        if crate::nested::is_nested_repo(&root, &probe, path) {
            nested.push(path.to_path_buf());
            1
        } else {
            0
        }
    };
    // One walk of the worktree: `add_all` stages new and changed files and also drops the
    // deleted ones from the index (libgit2 removes every path its workdir diff no longer finds),
    // so an `update_all` after it would only walk the worktree a second time.
    index
        .add_all(["*"], IndexAddOption::DEFAULT, Some(&mut skip_nested))
        .ctx("stage")?;
    for folder in &nested {
        crate::nested::stage_plain(wt, &mut index, &root, folder)?;
    }
    let tree_id = index.write_tree_to(objects).ctx("write tree")?;
    index.write().ctx("write index")?;
    let head = wt
        .head()
        .and_then(|h| h.peel_to_commit())
        .ctx("read HEAD")?;
    if head.tree_id() == tree_id {
        return Ok(None);
    }
    let tree = wt.find_tree(tree_id).ctx("write tree")?;
    let id = wt
        .commit(Some("HEAD"), signature, signature, message, &tree, &[&head])
        .ctx("commit")?;
    Ok(Some(id))
}

/// Brings a worktree (clean where it matters) to `commit`: a safe checkout, then HEAD.
pub(crate) fn move_worktree(wt: &Repository, commit: Oid) -> Result<(), GitError> {
    let head = wt.head().ok().and_then(|h| h.target());
    if head == Some(commit) {
        return Ok(());
    }
    checkout::switch_safely(wt, &checkout::tree_of(wt, commit)?)?;
    wt.set_head_detached(commit).ctx("move HEAD")
}

/// Writes the conflicted merge of `theirs` into `ours` into the worktree (which is at `ours`):
/// merged files, and conflict markers in the conflicting ones. Returns the paths touched.
pub(crate) fn write_conflict(
    wt: &Repository,
    ours: Oid,
    theirs: Oid,
) -> Result<Vec<String>, GitError> {
    let root = workdir(wt)?;
    let (ours_tree, theirs_tree) = (checkout::tree_of(wt, ours)?, checkout::tree_of(wt, theirs)?);
    let touched = changed_paths(wt, &ours_tree, &theirs_tree)?;
    // Refuse to overwrite local edits in the paths the merge writes.
    let dirty = checkout::dirty_files(wt, &ours_tree, &theirs_tree)?;
    if let Some(path) = dirty.iter().find(|p| touched.contains(*p)) {
        return Err(GitError::other(
            "merge",
            format!(
                "local changes to {path} in {} would be overwritten",
                root.display()
            ),
        ));
    }
    let (o, t) = (
        wt.find_commit(ours).ctx("merge")?,
        wt.find_commit(theirs).ctx("merge")?,
    );
    let mut index = wt.merge_commits(&o, &t, None).ctx("merge")?;
    let mut opts = CheckoutBuilder::new();
    opts.force()
        .allow_conflicts(true)
        .conflict_style_merge(true)
        .update_index(false)
        .disable_pathspec_match(true);
    for path in &touched {
        opts.path(path.as_str());
    }
    wt.checkout_index(Some(&mut index), Some(&mut opts))
        .ctx("write conflicts")?;
    Ok(touched.into_iter().collect())
}

/// Puts `touched` paths back to their content in `ours` (after a failed resolution).
pub(crate) fn undo_conflict(
    wt: &Repository,
    ours: Oid,
    touched: &[String],
) -> Result<(), GitError> {
    let root = workdir(wt)?;
    let tree = checkout::tree_of(wt, ours)?;
    for path in touched {
        checkout::restore_path(wt, root, &tree, path)?;
    }
    Ok(())
}

/// The `paths` of the worktree whose content still has conflict markers.
pub(crate) fn with_conflict_markers(
    wt: &Repository,
    paths: &[String],
) -> Result<Vec<String>, GitError> {
    let root = workdir(wt)?;
    Ok(paths
        .iter()
        .filter(|p| {
            std::fs::read(root.join(p))
                .is_ok_and(|content| orchestrator_core::git::has_conflict_markers(&content))
        })
        .cloned()
        .collect())
}

/// Commits the merge of `theirs` into `ours` with the conflicting `paths` taken from the
/// worktree as a resolver left them, and checks the result out. Returns the merge commit.
pub(crate) fn commit_resolution(
    wt: &Repository,
    ours: Oid,
    theirs: Oid,
    touched: &[String],
    signature: &Signature<'_>,
    message: &str,
) -> Result<Oid, GitError> {
    let root = workdir(wt)?.to_path_buf();
    let (o, t) = (
        wt.find_commit(ours).ctx("merge")?,
        wt.find_commit(theirs).ctx("merge")?,
    );
    let mut index = wt.merge_commits(&o, &t, None).ctx("merge")?;
    for path in conflict_paths(&index)? {
        index
            .conflict_remove(Path::new(&path))
            .ctx("stage resolution")?;
        let file = root.join(&path);
        let Ok(meta) = std::fs::symlink_metadata(&file) else {
            continue; // the resolver deleted it
        };
        let id = wt.blob_path(&file).ctx("stage resolution")?;
        index
            .add(&index_entry(&path, id, &meta))
            .ctx("stage resolution")?;
    }
    let tree_id = index.write_tree_to(wt).ctx("write resolved tree")?;
    let tree = wt.find_tree(tree_id).ctx("write resolved tree")?;
    let id = wt
        .commit(None, signature, signature, message, &tree, &[&o, &t])
        .ctx("commit resolution")?;
    let mut opts = CheckoutBuilder::new();
    opts.force().disable_pathspec_match(true);
    for path in touched {
        opts.path(path.as_str());
    }
    wt.checkout_tree(tree.as_object(), Some(&mut opts))
        .ctx("check out resolution")?;
    wt.set_head_detached(id).ctx("move HEAD")?;
    Ok(id)
}

/// An index entry for a resolved file (its stat data is refreshed by the checkout after).
fn index_entry(path: &str, id: Oid, meta: &std::fs::Metadata) -> IndexEntry {
    #[cfg(unix)]
    let executable = {
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode() & 0o111 != 0
    };
    #[cfg(not(unix))]
    let executable = false;
    let mode = if meta.file_type().is_symlink() {
        0o120000
    } else if executable {
        0o100755
    } else {
        0o100644
    };
    IndexEntry {
        ctime: IndexTime::new(0, 0),
        mtime: IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode,
        uid: 0,
        gid: 0,
        file_size: 0,
        id,
        flags: path.len().min(0xfff) as u16,
        flags_extended: 0,
        path: path.as_bytes().to_vec(),
    }
}

/// Paths that differ between two trees (rename detection off: both names of a rename).
fn changed_paths(
    repo: &Repository,
    a: &Tree<'_>,
    b: &Tree<'_>,
) -> Result<BTreeSet<String>, GitError> {
    let diff = repo.diff_tree_to_tree(Some(a), Some(b), None).ctx("diff")?;
    let mut paths = BTreeSet::new();
    for delta in diff.deltas() {
        for file in [delta.old_file(), delta.new_file()] {
            if let Some(p) = file.path() {
                paths.insert(p.to_string_lossy().into_owned());
            }
        }
    }
    Ok(paths)
}

fn workdir(wt: &Repository) -> Result<&Path, GitError> {
    wt.workdir()
        .ok_or_else(|| GitError::other("merge", "the repository has no working folder"))
}

/// Files and lines changed between two commits.
pub(crate) fn diff_stats(repo: &Repository, from: Oid, to: Oid) -> Result<DiffStats, GitError> {
    let (a, b) = (checkout::tree_of(repo, from)?, checkout::tree_of(repo, to)?);
    let diff = repo
        .diff_tree_to_tree(Some(&a), Some(&b), None)
        .ctx("diff")?;
    let stats = diff.stats().ctx("diff")?;
    Ok(DiffStats {
        files_changed: stats.files_changed(),
        insertions: stats.insertions(),
        deletions: stats.deletions(),
    })
}
