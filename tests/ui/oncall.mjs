// Opens the loader's on-call page from Airflow's navigation (Browse, Loader on-call) in headless Chromium and reads it.
//   node oncall.mjs BASE_URL SCREENSHOT [WAY]
// Prints one JSON line: the navigation link, the page's verdict and facts, the failed intervals
// with their task-run links, and each way out with its filled fields. With WAY (rerun, backfill,
// ...), it then takes that way out as filled (as on-call would: the button, then OK) and adds the
// URL it opened.
import { chromium } from 'playwright-core';

const [baseUrl, screenshot, action] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
});
try {
  const context = await browser.newContext({ viewport: { width: 1300, height: 1500 } });
  const page = await context.newPage();
  // Airflow's UI first: it signs the browser in, and its navigation carries the page's link.
  await page.goto(`${baseUrl}/`);
  const browse = page.getByRole('button', { name: 'Browse' });
  await browse.waitFor({ timeout: 180000 });
  await browse.click();
  const link = page.getByRole('menuitem', { name: 'Loader on-call' });
  const href = await link.getAttribute('href');
  // The link opens the page in a tab of its own (an external view without a route of the UI).
  const [opened] = await Promise.all([
    context.waitForEvent('page', { timeout: 20000 }).catch(() => null),
    link.click(),
  ]);
  const oncall = opened ?? page;
  await oncall.waitForLoadState();
  await oncall.locator('h1').waitFor();
  await oncall.screenshot({ path: screenshot, fullPage: true });
  const seen = await oncall.evaluate(() => {
    const text = (e) => (e ? e.innerText.trim() : null);
    const facts = {};
    for (const dt of document.querySelectorAll('dt')) facts[dt.innerText] = dt.nextElementSibling.innerText;
    const failed = [...document.querySelectorAll('#failed tr')].slice(1).map((row) => ({
      cells: [...row.querySelectorAll('td')].map((td) => td.innerText),
      link: row.querySelector('a.task-run')?.getAttribute('href') ?? null,
    }));
    const tables = [...document.querySelectorAll('#tables tr')].slice(1).map(
      (row) => [...row.querySelectorAll('td')].map((td) => td.innerText));
    const ways = {};
    for (const form of document.querySelectorAll('form.way')) {
      ways[form.id.replace('way-', '')] = {
        dag: form.dataset.dag,
        runId: form.dataset.runId ?? null,
        taskId: form.dataset.taskId ?? null,
        fields: Object.fromEntries([...form.querySelectorAll('input')].map((i) => [i.name, i.value])),
        labels: [...form.querySelectorAll('label')].map((l) => l.innerText),
      };
    }
    return {
      title: text(document.querySelector('h1')),
      verdict: text(document.querySelector('.verdict')),
      why: text(document.querySelector('h1 + p')),
      facts, failed, tables, ways,
    };
  });
  seen.navHref = href;
  seen.url = oncall.url();
  if (action) {
    oncall.on('dialog', (dialog) => dialog.accept());
    await oncall.locator(`#way-${action} button`).click();
    await oncall.waitForURL(/\/runs\//, { timeout: 120000 });
    seen.opened = oncall.url();
  }
  console.log(JSON.stringify(seen));
} finally {
  await browser.close();
}
