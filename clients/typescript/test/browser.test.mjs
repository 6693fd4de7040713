// The browser example (examples/browser) in a real headless Chromium against
// the real gateway: the subprotocol credential works where a page cannot set
// headers, and a page from an origin the route does not allow is refused.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'node:http'
import { chromium } from 'playwright-core'
import { serveBrowserExample } from '../../../examples/browser/serve.mjs'
import { startGateway, contractPart } from './gateway.mjs'

let gw, allowed, other, browser
before(async () => {
  allowed = await serveBrowserExample({ host: '127.0.0.1', port: 0 })
  // The same page again, opened as localhost: another origin to the gateway.
  other = await serveBrowserExample({ host: '127.0.0.1', port: 0 })
  gw = await startGateway({ allowedOrigins: [new URL(allowed.url).host] })
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
})
after(async () => {
  await browser?.close()
  await gw?.kill()
  await allowed?.close()
  await other?.close()
})

/** Opens the example page at pageUrl, presses Run, and returns the output's state and text. */
async function runPage(pageUrl) {
  const page = await browser.newPage()
  try {
    const sockets = []
    page.on('websocket', (ws) => sockets.push(ws.url()))
    await page.goto(`${pageUrl}?url=${encodeURIComponent(gw.url)}&key=${encodeURIComponent(gw.key)}`)
    await page.click('#run')
    await page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('output').dataset.state), null, { timeout: 20000 })
    const out = await page.$eval('#output', (el) => ({ state: el.dataset.state, text: el.textContent }))
    return { ...out, sockets, title: await page.title() }
  } finally {
    await page.close()
  }
}

test('browser: the page runs a program with the subprotocol credential, its tool answered by the page', async () => {
  const r = await runPage(allowed.url)
  assert.equal(r.state, 'done', r.text)
  assert.deepEqual(contractPart(JSON.parse(r.text)), { result: r.title.toUpperCase(), logs: [{ level: 'log', text: 'asked the page' }] })
  assert.deepEqual(r.sockets, [gw.url])
})

test('browser: a page from an origin the route does not allow is refused', async () => {
  const otherOrigin = other.url.replace('127.0.0.1', 'localhost')
  const r = await runPage(otherOrigin)
  assert.equal(r.state, 'error')
  assert.ok(r.text.startsWith('CONNECTION_REJECTED: '), r.text)
  // What the gateway answered that handshake: 403 before any upgrade.
  const status = await new Promise((resolve, reject) => {
    const u = new URL(gw.url.replace(/^ws/, 'http'))
    const req = request({ host: u.hostname, port: u.port, path: u.pathname, headers: {
      Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==',
      'Sec-WebSocket-Protocol': `codemode.executor.v1, codemode.bearer.${gw.key}`, Origin: new URL(otherOrigin).origin,
    } })
    req.on('response', (res) => { res.resume(); resolve(res.statusCode) })
    req.on('upgrade', (res, socket) => { socket.destroy(); resolve(res.statusCode) })
    req.on('error', reject)
    req.end()
  })
  assert.equal(status, 403)
})
