// The browser half of tests/it/dashboard.rs: real Chromium through
// playwright-core, one browser for every check. Settings come as JSON in
// argv[2]; turns are taken with the Rust test through files in `dir`; the
// answer is one JSON line on stdout.
"use strict";
const fs = require("fs");
const path = require("path");
const { chromium } = require(process.env.TROUPE_PLAYWRIGHT);

const cfg = JSON.parse(process.argv[2]);
const out = {};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const LONG = { timeout: 90000 };

function signal(name, text = "") {
  const file = path.join(cfg.dir, name);
  fs.writeFileSync(file + ".tmp", text);
  fs.renameSync(file + ".tmp", file);
}

async function waitFile(name, ms = 180000) {
  const file = path.join(cfg.dir, name);
  const end = Date.now() + ms;
  while (!fs.existsSync(file)) {
    if (Date.now() > end) throw new Error("no " + name + " from the test");
    await sleep(25);
  }
  return fs.readFileSync(file, "utf8");
}

async function shot(page, name) {
  fs.mkdirSync(cfg.shots, { recursive: true });
  await page.screenshot({ path: path.join(cfg.shots, name + ".png"), fullPage: false });
}

async function main() {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    headless: true,
    // A fresh profile per launch is Playwright's default (new user-data-dir).
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, colorScheme: "light" });
    const board = await context.newPage();
    await board.goto(cfg.base + "/ui/login?token=" + encodeURIComponent(cfg.token));
    out.after_login_url = board.url();
    const anon = await browser.newContext();
    const denied = await (await anon.newPage()).goto(cfg.base + "/");
    out.anonymous_status = denied.status();
    await anon.close();
    await board.waitForFunction(() => document.querySelector("[data-testid=live-status]").textContent === "live");
    signal("logged-in");

    // The board fills as the plan is imported, and moves as Builders
    // complete (G2's task, while G1 waits for its plan's approval).
    const card = (id) => '[data-testid="task-' + cfg.feature + "/" + id + '"]';
    await board.waitForSelector(card("1.1"), LONG);
    await board.waitForSelector(card("1.2") + '[data-col="completed"]', LONG);
    await shot(board, "board");

    // The Builder's page, open before anything it does next.
    const agent = await context.newPage();
    await agent.goto(cfg.base + "/ui/agents");
    const link = agent.locator('[data-testid^="agent-link-builder-g1"]').first();
    await link.waitFor(LONG);
    await shot(agent, "agents");
    await link.click();
    await agent.waitForSelector("[data-testid=log]");

    // Its plan, approved from the page.
    const approvals = await context.newPage();
    await approvals.goto(cfg.base + "/ui/approvals");
    const approve = approvals.locator('[data-testid^="approve-"]').first();
    await approve.waitFor(LONG);
    await shot(approvals, "approvals");
    await approve.click();
    await approvals.waitForSelector("[data-testid=approvals-empty]", LONG);

    // What the Builder did after the approval arrives live: a gate denial.
    const denial = agent.locator("[data-testid=denial]").first();
    await denial.waitFor(LONG);
    out.denial_text = await denial.textContent();
    await shot(agent, "agent");

    // The server is killed and started again while the run goes on.
    signal("kill");
    await waitFile("restarted");
    await board.waitForFunction(() => window.troupeDashboard.connects > 1 &&
      document.querySelector("[data-testid=live-status]").textContent === "live", null, LONG);
    const newest = Number(await waitFile("done"));
    await board.waitForFunction((n) => window.troupeDashboard.last >= n, newest, LONG);
    out.initial_last = Number(await board.evaluate(() => document.body.dataset.lastEvent));
    out.applied = await board.evaluate(() => window.troupeDashboard.applied);
    out.activity = await board.$$eval("#activity li", (lis) => lis.map((l) => Number(l.dataset.event)));
    out.done_columns = await board.$$eval("article.task", (cards) => cards.map((c) => c.dataset.task + "=" + c.dataset.col));
    await shot(board, "board-done");

    const other = await context.newPage();
    await other.goto(cfg.base + "/ui/features/" + cfg.feature);
    out.feature_design = await other.locator("[data-testid=design]").count();
    out.commits = await other.locator('[data-testid^="commit-"]').count();
    await shot(other, "feature");
    await other.goto(cfg.base + "/ui/runs");
    await shot(other, "runs");
    await other.goto(cfg.base + "/ui/audit");
    await shot(other, "audit");

    // Engine settings: inspection → gemini writes its three phases.
    await other.goto(cfg.base + "/ui/engines");
    await other.selectOption("[data-testid=engine-inspection]", "gemini");
    await other.waitForFunction(() => document.querySelector("[data-testid=engines-status]").textContent.startsWith("saved"));
    await shot(other, "engines");

    // A phone in dark mode, and no JavaScript at all: the same board.
    const state = await context.storageState();
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, colorScheme: "dark", storageState: state });
    const small = await phone.newPage();
    await small.goto(cfg.base + "/");
    await shot(small, "board-phone-dark");
    const nojs = await browser.newContext({ javaScriptEnabled: false, storageState: state });
    const plain = await nojs.newPage();
    await plain.goto(cfg.base + "/");
    out.nojs_cards = await plain.locator("article.task").count();
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

// Benchmark mode: first paint of a big board, then store commit → card
// visible while the test's teammates claim and complete tasks.
async function bench() {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const page = await context.newPage();
    await page.goto(cfg.base + "/ui/login?token=" + encodeURIComponent(cfg.token), { waitUntil: "commit" });
    const paints = [];
    for (let i = 0; i < 3; i++) {
      const started = Date.now();
      await page.goto(cfg.base + "/", { waitUntil: "domcontentloaded" });
      await page.waitForSelector("article.task");
      const wall = Date.now() - started;
      const fcp = await page.evaluate(() => {
        const e = performance.getEntriesByName("first-contentful-paint")[0];
        return e ? e.startTime : null;
      });
      paints.push({ wall_ms: wall, fcp_ms: fcp, cards: await page.locator("article.task").count() });
    }
    out.paints = paints;
    await page.waitForFunction(() => document.querySelector("[data-testid=live-status]").textContent === "live", null, LONG);
    signal("bench-ready");
    const want = Number(await waitFile("bench-done"));
    await page.waitForFunction((n) => window.troupeDashboard.shown.length >= n, want, { timeout: 120000 });
    out.shown = await page.evaluate(() => window.troupeDashboard.shown);
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

(cfg.mode === "bench" ? bench() : main()).catch((e) => {
  process.stderr.write(String(e && e.stack || e) + "\n" + JSON.stringify(out) + "\n");
  process.exit(1);
});
