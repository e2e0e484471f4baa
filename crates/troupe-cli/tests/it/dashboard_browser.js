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

// What a page owes every user, checked in the page itself: a stable
// data-testid on every interactive element (agent-written documents and
// diffs are content, not controls), a label on every form field, text at
// WCAG AA contrast (4.5:1, 3:1 for large text) on its real background, and
// no sideways scrolling of the page.
async function checkPage(page, name) {
  const found = await page.evaluate(() => {
    const content = (el) => el.closest(".doc, .diff");
    const controls = [...document.querySelectorAll("a[href], button, input, select, textarea, summary")]
      .filter((el) => !content(el));
    const missing = controls.filter((el) => !el.dataset.testid).map((el) => el.outerHTML.slice(0, 80));
    const unlabeled = [...document.querySelectorAll("input, select, textarea")]
      .filter((el) => el.type !== "hidden" && el.labels.length === 0 && !el.getAttribute("aria-label"))
      .map((el) => el.outerHTML.slice(0, 80));
    const rgba = (s) => { const v = (s.match(/[\d.]+/g) || []).map(Number); return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1]; };
    const lum = (c) => {
      const [r, g, b] = c.slice(0, 3).map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const background = (el) => {
      for (; el; el = el.parentElement) {
        const c = rgba(getComputedStyle(el).backgroundColor);
        if (c[3] > 0) return c;
      }
      return [255, 255, 255, 1];
    };
    const low = [];
    for (const el of document.querySelectorAll("body *")) {
      if (el.closest("option, script, style") || !el.getClientRects().length) continue;
      if (![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
      const style = getComputedStyle(el);
      let alpha = 1;
      for (let a = el; a; a = a.parentElement) alpha *= Number(getComputedStyle(a).opacity);
      const bg = background(el);
      const fg = rgba(style.color).map((v, i) => (i < 3 ? v * alpha + bg[i] * (1 - alpha) : v));
      const [l1, l2] = [lum(fg), lum(bg)].sort((x, y) => y - x);
      const ratio = (l1 + 0.05) / (l2 + 0.05);
      const size = parseFloat(style.fontSize);
      const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
      if (ratio < (large ? 3 : 4.5)) low.push(el.tagName + "." + el.className + " " + ratio.toFixed(2) + ": " + el.textContent.trim().slice(0, 30));
    }
    const overflow = document.documentElement.scrollWidth > window.innerWidth + 1
      ? [...document.querySelectorAll("main *")].filter((el) => el.getBoundingClientRect().right > window.innerWidth + 1)
        .slice(0, 5).map((el) => el.outerHTML.slice(0, 80))
      : false;
    return { missing, unlabeled, low, overflow, background: lum(background(document.body)) };
  });
  (out.checks = out.checks || {})[name] = found;
}

// The live pages' record of what they applied: every event after the page
// was read, once (the test compares it with the store's event log).
async function applied(page, newest) {
  await page.waitForFunction((n) => window.troupeDashboard.last >= n, newest, LONG);
  return page.evaluate(() => ({
    initial: Number(document.body.dataset.lastEvent),
    applied: window.troupeDashboard.applied,
    connects: window.troupeDashboard.connects,
  }));
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
    // The keyboard: the first Tab lands on the skip link, Enter moves focus to the content.
    await board.keyboard.press("Tab");
    out.first_tab = await board.evaluate(() => document.activeElement.dataset.testid);
    await board.keyboard.press("Enter");
    out.after_skip = await board.evaluate(() => document.activeElement.id);
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
    // Decided from the keyboard: focus the button, press Enter.
    await approve.focus();
    await approvals.keyboard.press("Enter");
    await approvals.waitForSelector("[data-testid=approvals-empty]", LONG);

    // What the Builder did after the approval arrives live: a gate denial.
    const denial = agent.locator("[data-testid=denial]").first();
    await denial.waitFor(LONG);
    out.denial_text = await denial.textContent();
    await denial.scrollIntoViewIfNeeded();
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
    // Every page follows the stream through the restart, nothing twice.
    out.live = { agent: await applied(agent, newest), approvals: await applied(approvals, newest) };
    out.log_seqs = await agent.$$eval("#log li[data-seq]", (lis) => lis.map((l) => Number(l.dataset.seq)).filter((n) => n > 0));
    await checkPage(board, "board");
    await checkPage(agent, "agent");
    await checkPage(approvals, "approvals");
    out.activity = await board.$$eval("#activity li", (lis) => lis.map((l) => Number(l.dataset.event)));
    out.done_columns = await board.$$eval("article.task", (cards) => cards.map((c) => c.dataset.task + "=" + c.dataset.col));
    await shot(board, "board-done");

    const other = await context.newPage();
    await other.goto(cfg.base + "/ui/features/" + cfg.feature);
    out.feature_design = await other.locator("[data-testid=design]").count();
    out.commits = await other.locator('details[data-testid^="commit-"]').count();
    out.verdict_rounds = await other.$$eval('[data-testid=verdict-rounds] tbody tr', (rows) =>
      rows.map((r) => [...r.cells].map((c) => c.textContent).join(" ")));
    out.verdict_tally = await other.$$eval('[data-testid=verdict-tally] tbody tr', (rows) =>
      rows.map((r) => [...r.cells].map((c) => c.textContent).join(" ")));
    await other.locator("[data-testid=verdict-tally]").scrollIntoViewIfNeeded();
    await shot(other, "feature");
    await checkPage(other, "feature");
    for (const [name, url] of [["features", "/ui/features"], ["agents", "/ui/agents"], ["runs", "/ui/runs"], ["audit", "/ui/audit"]]) {
      await other.goto(cfg.base + url);
      if (name === "runs" || name === "audit") await shot(other, name);
      await checkPage(other, name);
    }

    // Engine settings, while a review's first Inspector works: inspection →
    // gemini writes its three phases, and the next Inspector spawns on it.
    await waitFile("inspecting");
    await other.goto(cfg.base + "/ui/engines");
    await other.selectOption("[data-testid=engine-inspection]", "gemini");
    await other.waitForFunction(() => document.querySelector("[data-testid=engines-status]").textContent.startsWith("saved"));
    await shot(other, "engines");
    await checkPage(other, "engines");
    signal("engines-set");

    // A phone in dark mode, and no JavaScript at all: the same board.
    const state = await context.storageState();
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, colorScheme: "dark", storageState: state });
    const small = await phone.newPage();
    await small.goto(cfg.base + "/");
    await shot(small, "board-phone-dark");
    await checkPage(small, "board-phone-dark");
    await small.goto(cfg.base + "/ui/features/" + cfg.feature);
    await checkPage(small, "feature-phone-dark");
    const login = await (await browser.newContext({ colorScheme: "dark" })).newPage();
    await login.goto(cfg.base + "/ui/login");
    await checkPage(login, "login-dark");
    // No JavaScript: every page is a complete view, refreshable by hand.
    const nojs = await browser.newContext({ javaScriptEnabled: false, storageState: state });
    const plain = await nojs.newPage();
    await plain.goto(cfg.base + "/");
    out.nojs_cards = await plain.locator("article.task").count();
    out.nojs = {};
    for (const url of ["/ui/agents", "/ui/features/" + cfg.feature, "/ui/approvals", "/ui/engines", "/ui/audit", "/ui/runs"]) {
      const res = await plain.goto(cfg.base + url);
      out.nojs[url] = [res.status(), await plain.locator("[data-page]").count(), await plain.locator("main > h1").textContent()];
    }
    out.nojs_agent_rows = await (await plain.goto(cfg.base + "/ui/agents"), plain.locator("[data-testid^=agent-link-]").count());
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
      const nav = await page.evaluate(() => {
        const n = performance.getEntriesByType("navigation")[0];
        return { bytes: n.decodedBodySize, ttfb: n.responseStart - n.requestStart };
      });
      paints.push({ wall_ms: wall, fcp_ms: fcp, server_ms: Math.round(nav.ttfb), html_bytes: nav.bytes,
        cards: await page.locator("article.task").count() });
    }
    out.paints = paints;
    await page.waitForFunction(() => document.querySelector("[data-testid=live-status]").textContent === "live", null, LONG);
    signal("bench-ready");
    const want = Number(await waitFile("bench-done"));
    try {
      await page.waitForFunction((n) => window.troupeDashboard.shown.length >= n, want, { timeout: 60000 });
    } catch (e) {
      // Report how far the page got rather than only that it timed out.
      out.stalled = await page.evaluate(() => ({ shown: window.troupeDashboard.shown.length,
        applied: window.troupeDashboard.applied.length, last: window.troupeDashboard.last }));
      process.stderr.write("stalled: " + JSON.stringify(out.stalled) + "\n");
    }
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
