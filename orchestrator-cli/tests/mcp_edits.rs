//! Through the built `orchestrator mcp`: the tools that build and change plans: scaffold/add/finalize, every reshape operation in
//! both spellings, plan and job updates, bulk updates, clone and the self-test plan.

mod common;
mod mcp_client;

use common::Repo;
use mcp_client::{call, failed, ok, wait_for, Client};
use orchestrator_testkit::fixtures::{git, job};
use serde_json::{json, Value};

async fn deps(client: &Client, plan: &str, producer: &str) -> Value {
    let r = call(
        client,
        "get_copilot_job",
        json!({"planId": plan, "producerId": producer}),
    )
    .await;
    ok(&r)["dependencies"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaffold_add_jobs_finalize() {
    let repo = Repo::new();
    let client = repo.mcp().await;
    let r = call(
        &client,
        "scaffold_copilot_plan",
        json!({"name": "assembled", "max_parallel": 2}),
    )
    .await;
    let plan = ok(&r)["planId"].as_str().expect("planId").to_owned();
    assert_eq!(ok(&r)["status"], "scaffolding");

    // One job given flat (snake_case), then two in one call.
    let r = call(
        &client,
        "add_copilot_plan_job",
        json!({"plan_id": plan, "producer_id": "base", "task": "base",
               "work": "echo base > base.txt", "dependencies": []}),
    )
    .await;
    assert_eq!(ok(&r)["jobMapping"].as_object().map(|m| m.len()), Some(1));
    let r = call(
        &client,
        "add_copilot_plan_jobs",
        json!({"planId": plan, "jobs": [
            job("left", "test -f base.txt && echo left > left.txt", &["base"]),
            job("right", "echo right > right.txt", &["base"]),
        ]}),
    )
    .await;
    let mapping = ok(&r)["jobMapping"].as_object().expect("mapping").clone();
    assert_eq!(mapping.len(), 3);
    // A job naming a dependency by jobId is stored with its producerId.
    let r = call(
        &client,
        "add_copilot_plan_job",
        json!({"planId": plan, "job": job("join", "cat left.txt right.txt > join.txt",
               &[mapping["left"].as_str().expect("id"), "right"])}),
    )
    .await;
    ok(&r);
    assert_eq!(deps(&client, &plan, "join").await, json!(["left", "right"]));
    let r = call(&client, "get_copilot_plan_status", json!({"planId": plan})).await;
    assert_eq!(ok(&r)["status"], "scaffolding");

    let r = call(&client, "finalize_copilot_plan", json!({"planId": plan})).await;
    let done = ok(&r);
    assert_eq!(done["jobMapping"].as_object().map(|m| m.len()), Some(4));
    let done = wait_for(&client, &plan, &["succeeded", "failed"]).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let target = done["targetBranch"].as_str().expect("target");
    assert_eq!(
        repo.try_show(target, "join.txt").as_deref(),
        Some("left\nright")
    );

    // Finalizing twice is refused.
    let r = call(&client, "finalize_copilot_plan", json!({"planId": plan})).await;
    assert!(failed(&r)["message"]
        .as_str()
        .is_some_and(|m| m.contains("not being scaffolded")));
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reshape_operation_in_both_spellings() {
    let repo = Repo::new();
    let client = repo.mcp().await;
    let r = call(
        &client,
        "create_copilot_plan",
        json!({"name": "reshaped", "startPaused": true, "jobs": [
            job("aaa", "echo a > a.txt", &[]),
            job("bbb", "echo b > b.txt", &["aaa"]),
            job("ccc", "echo c > c.txt", &["bbb"]),
            job("gone-one", "echo x > x.txt", &["aaa"]),
            job("gone-two", "echo y > y.txt", &["aaa"]),
        ]}),
    )
    .await;
    let plan = ok(&r)["planId"].as_str().expect("planId").to_owned();
    let ops = json!([
        {"type": "add_node", "spec": job("n-one", "echo n1 > n1.txt", &["aaa"])},
        {"op": "add_job", "job": job("n-two", "echo n2 > n2.txt", &[])},
        {"type": "remove_node", "producerId": "gone-one"},
        {"type": "remove_job", "jobId": "gone-two"},
        {"type": "update_deps", "producerId": "n-two", "dependencies": ["n-one"]},
        {"type": "add_before", "spec": job("pre-c", "echo p > p.txt", &[]), "existingJobId": "ccc"},
        {"type": "add_after", "spec": job("post-a", "echo q > q.txt", &[]), "after": "aaa"},
    ]);
    let r = call(
        &client,
        "reshape_copilot_plan",
        json!({"planId": plan, "operations": ops}),
    )
    .await;
    let doc = ok(&r);
    let mapping = doc["jobMapping"].as_object().expect("mapping");
    let mut names: Vec<&String> = mapping.keys().collect();
    names.sort();
    assert_eq!(
        names,
        ["aaa", "bbb", "ccc", "n-one", "n-two", "post-a", "pre-c"]
    );
    assert_eq!(deps(&client, &plan, "n-two").await, json!(["n-one"]));
    assert_eq!(deps(&client, &plan, "ccc").await, json!(["pre-c"]));
    assert_eq!(deps(&client, &plan, "pre-c").await, json!(["bbb"]));
    assert_eq!(deps(&client, &plan, "post-a").await, json!(["aaa"]));
    assert_eq!(deps(&client, &plan, "bbb").await, json!(["post-a"]));
    assert_eq!(deps(&client, &plan, "n-one").await, json!(["post-a"]));

    // The camelCase operation names too; and a mistake names the operation's field.
    let r = call(
        &client,
        "reshape_copilot_plan",
        json!({"planId": plan, "operations": [
            {"type": "addNode", "spec": job("n-three", "echo 3 > 3.txt", &["ccc"])},
            {"type": "explode", "producerId": "aaa"},
        ]}),
    )
    .await;
    assert_eq!(failed(&r)["field"], "operations[1].type");
    let r = call(
        &client,
        "reshape_copilot_plan",
        json!({"planId": plan, "operations": [
            {"type": "addNode", "spec": job("n-three", "echo 3 > 3.txt", &["ccc"])},
            {"type": "removeNode", "producerId": "n-three"},
            {"type": "add_node", "spec": {"producerId": "BAD", "task": "t", "work": "true", "dependencies": []}},
        ]}),
    )
    .await;
    let e = failed(&r);
    assert_eq!(e["field"], "BAD.producerId", "{e}");
    let r = call(
        &client,
        "reshape_copilot_plan",
        json!({"planId": plan, "operations": [{"type": "update_deps", "producerId": "aaa",
               "dependencies": ["ccc"]}]}),
    )
    .await;
    assert!(failed(&r)["message"]
        .as_str()
        .is_some_and(|m| m.contains("cycle")));

    let r = call(&client, "resume_copilot_plan", json!({"planId": plan})).await;
    ok(&r);
    let done = wait_for(&client, &plan, &["succeeded", "failed"]).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let target = done["targetBranch"].as_str().expect("target");
    for file in [
        "a.txt", "b.txt", "c.txt", "n1.txt", "n2.txt", "p.txt", "q.txt",
    ] {
        assert!(repo.try_show(target, file).is_some(), "{file} on {target}");
    }
    for file in ["x.txt", "y.txt"] {
        assert!(repo.try_show(target, file).is_none(), "{file} was removed");
    }
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_bulk_updates_and_clone() {
    let repo = Repo::new();
    let client = repo.mcp().await;
    let r = call(
        &client,
        "create_copilot_plan",
        json!({"name": "to fix", "jobs": [
            job("broken", "exit 3", &[]),
            job("also-broken", "exit 4", &[]),
            job("later", "echo later > later.txt", &["broken", "also-broken"]),
        ]}),
    )
    .await;
    let plan = ok(&r)["planId"].as_str().expect("planId").to_owned();
    let done = wait_for(&client, &plan, &["succeeded", "failed"]).await;
    assert_eq!(done["status"], "failed");

    let r = call(
        &client,
        "update_copilot_plan",
        json!({"planId": plan, "name": "fixed", "max_parallel": 1, "bogus": 1}),
    )
    .await;
    assert_eq!(failed(&r)["field"], "bogus");
    let r = call(
        &client,
        "update_copilot_plan",
        json!({"planId": plan, "name": "fixed", "max_parallel": 1}),
    )
    .await;
    assert_eq!(ok(&r)["name"], "fixed");

    let r = call(
        &client,
        "update_copilot_plan_job",
        json!({"planId": plan, "producerId": "broken", "work": "echo fixed > fixed.txt"}),
    )
    .await;
    ok(&r);
    let r = call(
        &client,
        "bulk_update_copilot_plan_jobs",
        json!({"planId": plan, "updates": [
            {"producerId": "also-broken", "work": "echo fixed2 > fixed2.txt", "group": "fixes"},
            {"producerId": "later", "changes": {"task": "run later"}},
        ]}),
    )
    .await;
    ok(&r);
    // A wrong field inside an entry is named with its position.
    let r = call(
        &client,
        "bulk_update_copilot_plan_jobs",
        json!({"planId": plan, "updates": [{"producerId": "later", "changes": {"wrok": "x"}}]}),
    )
    .await;
    let e = failed(&r);
    assert!(
        e["field"]
            .as_str()
            .is_some_and(|f| f.contains("updates[0]") && f.contains("wrok")),
        "{e}"
    );

    let r = call(&client, "retry_copilot_plan", json!({"planId": plan})).await;
    ok(&r);
    let done = wait_for(&client, &plan, &["succeeded", "failed"]).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let target = done["targetBranch"].as_str().expect("target").to_owned();
    assert_eq!(
        repo.try_show(&target, "fixed2.txt").as_deref(),
        Some("fixed2")
    );

    // A succeeded plan cannot change; its clone runs again on its own branch.
    let r = call(
        &client,
        "update_copilot_plan_job",
        json!({"planId": plan, "producerId": "later", "work": "true"}),
    )
    .await;
    assert!(failed(&r)["message"]
        .as_str()
        .is_some_and(|m| m.contains("succeeded")));
    let r = call(
        &client,
        "clone_copilot_plan",
        json!({"planId": plan, "name": "again", "startPaused": true}),
    )
    .await;
    let clone = ok(&r);
    let copy = clone["planId"].as_str().expect("planId").to_owned();
    assert_ne!(copy, plan);
    assert_eq!(clone["clonedFrom"], plan.as_str());
    assert_eq!(clone["status"], "paused");
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_self_test_plan_fails_retries_and_succeeds() {
    let repo = Repo::new();
    let client = repo.mcp().await;
    let r = call(&client, "run_copilot_integration_test", json!({})).await;
    let plan = ok(&r)["planId"].as_str().expect("planId").to_owned();
    let done = wait_for(&client, &plan, &["succeeded", "canceled"]).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let jobs = done["jobs"].as_array().expect("jobs");
    let flaky = jobs
        .iter()
        .find(|j| j["producerId"] == "flaky")
        .expect("flaky");
    assert_eq!(flaky["attempts"], 2, "{flaky}");
    let target = done["targetBranch"].as_str().expect("target");
    assert!(target.starts_with("orchestrator/self-test-"), "{target}");
    assert_eq!(
        repo.try_show(target, "selftest/join.txt").as_deref(),
        Some("left\nright")
    );
    assert_eq!(
        git(&repo.dir, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "main"
    );
    assert!(repo.try_show("main", "selftest/join.txt").is_none());
    let _ = client.cancel().await;
}
