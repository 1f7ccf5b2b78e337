//! A merge decided by the trees alone, for the merges the engine makes most: a job's commit
//! into the snapshot or target branch, where the two sides changed different paths.
//!
//! Where a side left a subtree as the merge base had it, the other side's subtree is taken
//! whole without reading it, so the merge reads only the folders both sides changed: a job's
//! commit merges into a 10,000-file repository in a handful of tree reads, where libgit2's
//! `merge_commits` walks all three trees and builds an index of every path.
//!
//! It gives up (`None`, and the caller merges with libgit2) wherever a path needs more than the
//! trees: a file both sides changed differently (a content merge, or a conflict), a file on one
//! side where the other has a folder, and any deletion. Deletions are left to libgit2 because
//! a deleted path may be one half of a rename, which libgit2 detects (a rename on one side and
//! a change on the other merge cleanly; a path renamed differently on each side conflicts):
//! without deletions there are no renames, and every path this merge decides is decided as
//! libgit2 and git decide it. Criss-cross histories (several merge bases) are left to it too.

use git2::{Commit, ErrorCode, Oid, Repository, Tree, TreeEntry};

/// Git's mode of a folder entry.
const FOLDER: i32 = 0o040000;

/// The merge bases of `a` and `b` (none for unrelated histories), redundant ones left out.
pub(crate) fn merge_bases(repo: &Repository, a: Oid, b: Oid) -> Result<Vec<Oid>, git2::Error> {
    match repo.merge_bases(a, b) {
        Ok(bases) => Ok(bases.iter().copied().collect()),
        Err(e) if e.code() == ErrorCode::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// The tree of merging commit `theirs` into commit `ours`, whose merge bases are `bases` (see
/// [`merge_bases`]), when the trees alone decide it (see the module docs); `None` when libgit2
/// must merge.
pub(crate) fn merged_tree(
    repo: &Repository,
    ours: &Commit<'_>,
    theirs: &Commit<'_>,
    bases: &[Oid],
) -> Result<Option<Oid>, git2::Error> {
    // No base (unrelated histories: libgit2 merges them from an empty base), or several.
    let [base] = bases else {
        return Ok(None);
    };
    let base = repo.find_commit(*base)?.tree_id();
    merge(repo, Some(base), ours.tree_id(), theirs.tree_id())
}

/// Whether going from entry `from` to entry `to` deletes a path (a folder's files count, read
/// only where the folders differ).
fn deletes(repo: &Repository, from: Side, to: Side) -> Result<bool, git2::Error> {
    match (from, to) {
        (None, _) => Ok(false),
        (Some(_), None) => Ok(true),
        (Some(f), Some(t)) if f == t => Ok(false),
        (Some((f, FOLDER)), Some((t, FOLDER))) => {
            let (f, t) = (repo.find_tree(f)?, repo.find_tree(t)?);
            for e in f.iter() {
                if deletes(
                    repo,
                    Some(side(&e)),
                    t.get_name_bytes(e.name_bytes()).as_ref().map(side),
                )? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        // A folder that became a file, or a file a folder.
        (Some((_, f)), Some((_, t))) => Ok(f == FOLDER || t == FOLDER),
    }
}

/// One entry as the merge compares it: its object and mode.
type Side = Option<(Oid, i32)>;

fn side(entry: &TreeEntry<'_>) -> (Oid, i32) {
    (entry.id(), entry.filemode())
}

/// Merges the trees `ours` and `theirs` of merge base `base` (absent: a folder both sides
/// added).
fn merge(
    repo: &Repository,
    base: Option<Oid>,
    ours: Oid,
    theirs: Oid,
) -> Result<Option<Oid>, git2::Error> {
    if ours == theirs || base == Some(theirs) {
        return Ok(Some(ours));
    }
    if base == Some(ours) {
        return Ok(Some(theirs));
    }
    let find = |id: Oid| repo.find_tree(id);
    let base = base.map(find).transpose()?;
    let (ours, theirs) = (find(ours)?, find(theirs)?);
    // A path only one side has is an addition (or a deletion, which gives up): the entries of
    // both sides cover every path the result can have.
    if let Some(base) = &base {
        let deleted = |side: &Tree<'_>| {
            base.iter()
                .any(|e| side.get_name_bytes(e.name_bytes()).is_none())
        };
        if deleted(&ours) || deleted(&theirs) {
            return Ok(None);
        }
    }
    let mut result = repo.treebuilder(Some(&ours))?;
    for entry in theirs.iter() {
        let name = entry.name_bytes();
        let b = base
            .as_ref()
            .and_then(|b| b.get_name_bytes(name).as_ref().map(side));
        let o = ours.get_name_bytes(name).as_ref().map(side);
        let t = Some(side(&entry));
        if o == t {
            // Both sides made the same change. A folder both emptied of the same path is
            // still a deletion to give up on: on one side it may pair with an addition
            // elsewhere into a rename, which conflicts with the other side's deletion.
            if b.is_some() && b != o && deletes(repo, b, o)? {
                return Ok(None);
            }
            continue; // the builder holds ours already
        }
        if b == t {
            continue;
        }
        let taken = if b == o {
            t
        } else {
            match (b, o, t) {
                (b, Some((o, FOLDER)), Some((t, FOLDER)))
                    if b.is_none_or(|(_, mode)| mode == FOLDER) =>
                {
                    let Some(merged) = merge(repo, b.map(|(id, _)| id), o, t)? else {
                        return Ok(None);
                    };
                    Some((merged, FOLDER))
                }
                _ => return Ok(None),
            }
        };
        if let Some((id, mode)) = taken {
            // git2's tree builder takes `&str` names: a name that is not UTF-8 is left to
            // libgit2.
            let Ok(name) = std::str::from_utf8(name) else {
                return Ok(None);
            };
            result.insert(name, id, mode)?;
        }
    }
    result.write().map(Some)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::process::Command;

    use git2::{Index, IndexEntry, IndexTime, Signature};
    use proptest::prelude::*;

    use super::*;

    /// A commit's files: path -> (content, executable).
    type Files = BTreeMap<String, (String, bool)>;

    const PATHS: [&str; 9] = [
        "x", "y", "a/x", "a/y", "a/b/x", "a/b/y", "c/x", "c/d/x", "c/d/y",
    ];

    fn commit(repo: &Repository, files: &Files, parents: &[Oid]) -> Oid {
        let mut index = Index::new().expect("index");
        for (path, (content, exec)) in files {
            let id = repo.blob(content.as_bytes()).expect("blob");
            let time = IndexTime::new(0, 0);
            index
                .add(&IndexEntry {
                    ctime: time,
                    mtime: time,
                    dev: 0,
                    ino: 0,
                    mode: if *exec { 0o100755 } else { 0o100644 },
                    uid: 0,
                    gid: 0,
                    file_size: 0,
                    id,
                    flags: 0,
                    flags_extended: 0,
                    path: path.as_bytes().to_vec(),
                })
                .expect("add");
        }
        let tree = index.write_tree_to(repo).expect("tree");
        let tree = repo.find_tree(tree).expect("tree");
        let sig = Signature::new("t", "t@example.invalid", &git2::Time::new(0, 0)).expect("sig");
        let parents: Vec<_> = parents
            .iter()
            .map(|p| repo.find_commit(*p).expect("parent"))
            .collect();
        let parents: Vec<_> = parents.iter().collect();
        repo.commit(None, &sig, &sig, "c", &tree, &parents)
            .expect("commit")
    }

    /// What libgit2 and the git CLI make of the merge: the tree, or `None` for a conflict.
    fn reference(repo: &Repository, ours: Oid, theirs: Oid) -> (Option<Oid>, Option<Oid>) {
        let (o, t) = (
            repo.find_commit(ours).expect("ours"),
            repo.find_commit(theirs).expect("theirs"),
        );
        let mut index = repo.merge_commits(&o, &t, None).expect("merge");
        let libgit2 = (!index.has_conflicts()).then(|| index.write_tree_to(repo).expect("tree"));
        let out = Command::new("git")
            .arg("-C")
            .arg(repo.path())
            .args(["merge-tree", "--write-tree"])
            .arg(ours.to_string())
            .arg(theirs.to_string())
            .output()
            .expect("git merge-tree runs");
        let cli = out
            .status
            .success()
            .then(|| {
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .next()
                    .map(str::to_owned)
            })
            .flatten()
            .and_then(|line| Oid::from_str(line.trim()).ok());
        (libgit2, cli)
    }

    /// One side's change of a path: 0 keep, 1 change, 2 delete, 3 make executable.
    fn derive(base: &Files, ops: &[(u8, u8)]) -> Files {
        let mut files = base.clone();
        for (path, &(op, content)) in PATHS.iter().zip(ops) {
            let path = path.to_string();
            match (op, files.contains_key(&path)) {
                (1, _) => {
                    // Some contents are another path's base content: with a deletion of
                    // that path, an exact rename.
                    let text = match PATHS.get(usize::from(content).wrapping_sub(2)) {
                        Some(other) => format!("base {other}\n"),
                        None => format!("v{content}\n"),
                    };
                    files.insert(path, (text, false));
                }
                (2, true) => {
                    files.remove(&path);
                }
                (3, true) => {
                    if let Some(f) = files.get_mut(&path) {
                        f.1 = true;
                    }
                }
                _ => {}
            }
        }
        files
    }

    fn case(base_has: &[bool], ours_ops: &[(u8, u8)], theirs_ops: &[(u8, u8)]) -> bool {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init_bare(dir.path()).expect("init");
        let base: Files = PATHS
            .iter()
            .zip(base_has)
            .filter(|(_, &has)| has)
            .map(|(p, _)| (p.to_string(), (format!("base {p}\n"), false)))
            .collect();
        let root = commit(&repo, &base, &[]);
        let ours = commit(&repo, &derive(&base, ours_ops), &[root]);
        let theirs = commit(&repo, &derive(&base, theirs_ops), &[root]);
        let (o, t) = (
            repo.find_commit(ours).expect("ours"),
            repo.find_commit(theirs).expect("theirs"),
        );
        let bases = merge_bases(&repo, ours, theirs).expect("merge bases");
        let fast = merged_tree(&repo, &o, &t, &bases).expect("merge");
        let (libgit2, cli) = reference(&repo, ours, theirs);
        if let Some(tree) = fast {
            assert_eq!(Some(tree), libgit2, "libgit2 merges to the same tree");
            assert_eq!(Some(tree), cli, "git merge-tree merges to the same tree");
        }
        fast.is_some()
    }

    fn ops() -> impl Strategy<Value = Vec<(u8, u8)>> {
        prop::collection::vec(
            (
                prop_oneof![6 => Just(0u8), 3 => Just(1), 1 => Just(2), 1 => Just(3)],
                0u8..2,
            ),
            PATHS.len(),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn every_tree_decided_merge_is_what_libgit2_and_git_make(
            base in prop::collection::vec(any::<bool>(), PATHS.len()),
            ours in ops(),
            theirs in ops(),
        ) {
            case(&base, &ours, &theirs);
        }
    }

    #[test]
    fn changes_in_different_folders_and_files_merge_by_the_trees() {
        // Each side changes one file and adds one, in folders both sides changed.
        let base = [true; PATHS.len()];
        let mut ours = vec![(0, 0); PATHS.len()];
        let mut theirs = vec![(0, 0); PATHS.len()];
        ours[2] = (1, 0); // a/x
        theirs[3] = (1, 1); // a/y
        ours[4] = (3, 0); // a/b/x executable
        theirs[8] = (1, 0); // c/d/y
        assert!(case(&base, &ours, &theirs));
        // Additions where the base has nothing.
        let base = [false; PATHS.len()];
        ours[6] = (1, 0); // c/x
        theirs[7] = (1, 1); // c/d/x
        assert!(case(&base, &ours, &theirs));
    }

    #[test]
    fn deletions_and_both_sided_changes_are_left_to_libgit2() {
        let base = [true; PATHS.len()];
        let keep = vec![(0, 0); PATHS.len()];
        // A deletion in a folder the other side changed too.
        let (mut a, mut b) = (keep.clone(), keep.clone());
        a[5] = (2, 0); // a/b/y deleted
        b[4] = (1, 0); // a/b/x changed
        assert!(!case(&base, &a, &b), "a deletion may be half a rename");
        // The same deletion on both sides, with an addition of the deleted content on one
        // (a rename there, a deletion on the other side: git calls it a conflict).
        let (mut a, mut b) = (keep.clone(), keep.clone());
        a[5] = (2, 0);
        b[5] = (2, 0);
        a[6] = (1, 7); // c/x gets a/b/y's content
        b[0] = (1, 0);
        assert!(!case(&base, &a, &b), "the same deletion on both sides");
        // A file changed on both sides.
        let (mut a, mut b) = (keep.clone(), keep.clone());
        a[0] = (1, 0);
        b[0] = (1, 1);
        assert!(!case(&base, &a, &b), "a file changed on both sides");
        // A side that changed nothing: the other side is the merge, deletions and all.
        let mut a = keep.clone();
        a[5] = (2, 0);
        assert!(case(&base, &a, &keep));
    }
}
