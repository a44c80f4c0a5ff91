// Opens the delta DAG's trigger form in headless Chromium, checks its params, triggers a backfill.
//   node trigger_delta.mjs BASE_URL ARTIFACT_DIR LOGNUM LOGPOS
// Prints one JSON line: the param titles seen and the triggered run's id. Screenshots go to
// ARTIFACT_DIR (the form, the filled form, the run page).
import { chromium } from 'playwright-core';

const [baseUrl, artifacts, lognum, logpos] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1300 } });
  page.on('response', (r) => { if (r.request().method() !== 'GET') console.error('response', r.request().method(), r.url(), r.status()); });
  page.on('requestfailed', (r) => console.error('failed', r.method(), r.url(), r.failure()?.errorText));
  await page.goto(`${baseUrl}/dags/loader_continuous_delta`);
  const trigger = page.getByRole('button', { name: /trigger/i }).first();
  await trigger.waitFor({ timeout: 180000 });
  await trigger.click();
  const dialog = page.getByRole('dialog');
  // The form shows one section at a time (opening one folds the others): read the run
  // parameters' section, then open the backfill one, whose fields are filled below.
  const open = async (name) => {
    const section = dialog.getByRole('button', { name, exact: true });
    await section.waitFor();
    if ((await section.getAttribute('aria-expanded')) !== 'true') await section.click();
  };
  await open('Run Parameters');
  await dialog.getByText('Most changes per interval', { exact: true }).waitFor();
  const runParameters = await dialog.innerText();
  await open('Backfill');
  await dialog.getByText('Backfill from byte position', { exact: true }).waitFor();
  const text = `${await dialog.innerText()}\n${runParameters}`;
  await page.screenshot({ path: `${artifacts}/1-trigger-form.png` });
  const titles = [
    'Backfill from binlog file number',
    'Backfill from byte position',
    'Most changes per interval',
    'Dry run',
  ];
  const field = (title) =>
    dialog.getByText(title, { exact: true }).locator('xpath=ancestor::div[.//input][1]').locator('input').first();
  await field(titles[0]).fill(lognum);
  await field(titles[1]).fill(logpos);
  await page.screenshot({ path: `${artifacts}/2-backfill-filled.png` });
  await dialog.getByRole('button', { name: 'Trigger', exact: true }).click();
  await page.waitForURL(/\/runs\//, { timeout: 120000 });
  await page.waitForTimeout(2000);
  await page.screenshot({ path: `${artifacts}/3-run-page.png` });
  const runId = decodeURIComponent(page.url().split('/runs/')[1].split(/[/?#]/)[0]);
  console.log(JSON.stringify({ form: text, titles: titles.filter((t) => text.includes(t)), runId }));
} finally {
  await browser.close();
}
