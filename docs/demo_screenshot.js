// Draws docs/http-demo.png: the HTTP API's demo page (GET /) after one translation.
//   nmt-serve --providers cpu --http-port 8000 &            # the demo models
//   npm install puppeteer-core@23 && apt-get install chromium
//   node docs/demo_screenshot.js [http://127.0.0.1:8000/] [docs/http-demo.png]
const puppeteer = require("puppeteer-core");

const [url = "http://127.0.0.1:8000/", out = "docs/http-demo.png"] = process.argv.slice(2);

(async () => {
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--headless=new"],
  });
  const page = await browser.newPage();
  await page.setViewport({ width: 900, height: 760, deviceScaleFactor: 1 });
  await page.goto(url, { waitUntil: "networkidle0" });
  await page.$eval("#text", (el) => { el.value = "We need eggs, milk and cheese."; });
  await page.click("#go");
  await page.waitForSelector("table.attention");
  await page.screenshot({ path: out, fullPage: true });
  await browser.close();
})().catch((e) => { console.error(e); process.exit(1); });
