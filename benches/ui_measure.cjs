// For benches/ui.sh: loads a dashboard page in Debian's Chromium (playwright-core) RUNS times
// and prints the median time to first render (navigation start to the load event, the DAG
// drawn), or holds a plan page open for HOLD_MS (its live updates flowing) and prints nothing.
// Usage: node ui_measure.cjs PLAYWRIGHT_CORE URL render|hold RUNS_OR_MS
"use strict";
const [playwright, url, mode, arg] = process.argv.slice(2);
const { chromium } = require(playwright);
(async () => {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  if (mode === "render") {
    const times = [];
    for (let i = 0; i < Number(arg); i++) {
      await page.goto(url, { waitUntil: "load" });
      times.push(await page.evaluate(() => {
        const nav = performance.getEntriesByType("navigation")[0];
        return nav.loadEventEnd - nav.startTime;
      }));
    }
    times.sort((a, b) => a - b);
    const nodes = await page.$$eval("svg.dag g.node, table.plans tr[data-plan]", (e) => e.length);
    process.stdout.write(`${(times[Math.floor(times.length / 2)] / 1000).toFixed(3)} ${nodes}\n`);
  } else {
    await page.goto(url, { waitUntil: "load" });
    await page.waitForSelector("body[data-live=on]", { timeout: 10000 });
    await page.waitForTimeout(Number(arg));
  }
  await browser.close();
})();
