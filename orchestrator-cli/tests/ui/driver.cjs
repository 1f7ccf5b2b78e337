// Drives Debian's Chromium through the DevTools protocol (playwright-core) against a running
// `orchestrator ui`, for orchestrator-cli/tests/ui.rs. Takes one JSON argument:
//   {"url", "running", "finished", "goFile", "gate", "screenshot", "playwright"}
// Performs the scenario step by step and prints one JSON object with what it saw; the Rust
// test asserts on it. Every wait is bounded.
"use strict";
const fs = require("fs");
const cfg = JSON.parse(process.argv[2]);
const { chromium } = require(cfg.playwright);

const base = cfg.url.replace(/\/\?token=.*$/, "");
const token = cfg.url.replace(/^.*token=/, "");
const at = (path) => base + path + (path.includes("?") ? "&" : "?") + "token=" + token;

(async () => {
  const seen = {};
  const browser = await chromium.launch({
    executablePath: cfg.chromium || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-background-networking", "--disable-component-update",
      "--disable-sync", "--no-first-run", "--disable-default-apps"],
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const failed = [];
    page.on("requestfailed", (r) => failed.push(r.url()));
    const outside = [];
    page.on("request", (r) => { if (!r.url().startsWith(base)) outside.push(r.url()); });

    // The plans page lists both plans.
    await page.goto(cfg.url);
    seen.plansListed = await page.$$eval("tr[data-plan]", (rows) => rows.map((r) => r.getAttribute("data-plan")));

    // The running plan's page: its DAG with every job, live.
    await page.goto(at("/plans/" + cfg.running));
    await page.waitForSelector("body[data-live=on]", { timeout: 10000 });
    seen.dagNodes = await page.$$eval("svg.dag g.node", (gs) => gs.map((g) => g.getAttribute("class")));
    // The first job turns succeeded once its go-file exists: measure until the page shows it.
    const t0 = Date.now();
    fs.writeFileSync(cfg.goFile, "go\n");
    await page.waitForSelector('svg.dag g.node[data-node="0"].st-succeeded', { timeout: 10000 });
    seen.shownAt = Date.now();
    seen.updateMs = seen.shownAt - t0;
    seen.reloaded = await page.evaluate(() => performance.getEntriesByType("navigation").length);

    // The gate waits for approval: it shows in the waiting list; approve it there.
    await page.waitForSelector('svg.dag g.node.st-waiting', { timeout: 20000 });
    await page.goto(at("/waiting"));
    seen.waitingRows = await page.$$eval("table.waiting tr[data-plan]", (rows) => rows.map((r) => r.textContent));
    await page.click(`tr[data-plan="${cfg.running}"] button[data-act=approve]`);
    await page.waitForSelector(".msg.ok", { timeout: 15000 });
    seen.approveMessage = await page.textContent(".msg.ok");

    // The plan goes on to its end; the page follows without a reload.
    await page.goto(at("/plans/" + cfg.running));
    await page.waitForSelector("body[data-live=on]", { timeout: 10000 });
    await page.waitForSelector("#plan-status .st-succeeded", { timeout: 30000 });
    seen.finalStatus = await page.textContent("#plan-status");

    // The timeline: one bar per phase per job, as the plan's JSON has them.
    await page.reload();
    seen.bars = await page.$$eval("svg.gantt rect.bar", (rs) => rs.map((r) => r.getAttribute("data-job") + "/" + r.getAttribute("data-phase")));
    const doc = await (await page.request.get(at("/plans/" + cfg.running + "/json"))).json();
    seen.timeline = doc.timeline.map((e) => e.producerId + "/" + e.phase);
    // When the first job's last phase ended: it was succeeded from then on.
    seen.slowEndedAt = Math.max(...doc.timeline.filter((e) => e.producerId === "slow").map((e) => e.endedAt || 0));

    // A job's page.
    await page.goto(at("/plans/" + cfg.running + "/jobs/0"));
    seen.jobHeading = await page.textContent("h1");
    seen.jobLog = await page.textContent("#log");

    // A screenshot of the plan page, and how many colours it has.
    await page.goto(at("/plans/" + cfg.running));
    await page.screenshot({ path: cfg.screenshot, fullPage: false });
    const png = fs.readFileSync(cfg.screenshot).toString("base64");
    const probe = await context.newPage();
    await probe.setContent("<canvas id=c></canvas>");
    seen.colours = await probe.evaluate(async (data) => {
      const img = new Image();
      img.src = "data:image/png;base64," + data;
      await img.decode();
      const c = document.getElementById("c");
      c.width = img.width; c.height = img.height;
      const g = c.getContext("2d");
      g.drawImage(img, 0, 0);
      const px = g.getImageData(0, 0, img.width, img.height).data;
      const set = new Set();
      for (let i = 0; i < px.length; i += 4 * 7) set.add((px[i] >> 4) << 8 | (px[i + 1] >> 4) << 4 | (px[i + 2] >> 4));
      return set.size;
    }, png);

    // The finished plan's page renders too.
    await page.goto(at("/plans/" + cfg.finished));
    seen.finishedStatus = await page.textContent("#plan-status");
    seen.failedRequests = failed.filter((u) => !u.includes("/events"));
    seen.outsideRequests = outside;
  } catch (e) {
    seen.error = String(e && e.stack || e);
    try {
      seen.atError = await browser.contexts()[0].pages()[0].$$eval("svg.dag g.node", (gs) => gs.map((g) => g.getAttribute("class")));
      seen.planAtError = (await (await browser.contexts()[0].request.get(at("/plans/" + cfg.running + "/json"))).json()).jobs.map((j) => j.producerId + ":" + j.status);
    } catch (_) { /* the page is gone */ }
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(seen) + "\n");
})();
