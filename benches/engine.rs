//! Criterion benches of the engine: random DAGs and a chain of no-op jobs, in-memory store,
//! `isolation: "none"` (the `engine_bench` example runs the 100k/1M-node versions).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

use orchestrator::core::plan::PlanSpec;
use orchestrator::core::{
    FnRunner, InMemoryPlanRepository, Orchestrator, OrchestratorOptions, PlanStatus, WorkOutput,
};
use orchestrator::synthetic;

fn run(rt: &tokio::runtime::Runtime, spec: PlanSpec) {
    rt.block_on(async {
        let o = Orchestrator::builder()
            .repository(InMemoryPlanRepository::new())
            .runner("shell", FnRunner::sync(|_, _| Ok(WorkOutput::default())))
            .options(OrchestratorOptions::default().global_capacity(256))
            .build()
            .expect("valid options");
        let id = o.run(spec, std::env::temp_dir()).await.expect("plan runs");
        assert_eq!(o.wait(&id).await.expect("plan ends"), PlanStatus::Succeeded);
    });
}

fn engine(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut g = c.benchmark_group("engine");
    g.sample_size(10);
    for n in [1_000usize, 10_000] {
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::new("random_dag", n), &n, |b, &n| {
            b.iter_batched(
                || synthetic::random_dag(n, 1, "true"),
                |spec| run(&rt, spec),
                criterion::BatchSize::LargeInput,
            )
        });
    }
    let n = 10_000;
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function(BenchmarkId::new("chain", n), |b| {
        b.iter_batched(
            || synthetic::chain(n, "true"),
            |spec| run(&rt, spec),
            criterion::BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, engine);
criterion_main!(benches);
