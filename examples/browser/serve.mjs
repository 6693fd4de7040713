// @ts-check
// Serves the browser example: the page, the client package's ESM build and
// capnweb, on loopback. `make run` accepts the page's origin,
// http://127.0.0.1:8081, on its browser route.
//
//   make run
//   node examples/browser/serve.mjs     # then open http://127.0.0.1:8081/
import { createServer } from 'node:http'
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join, normalize, sep } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const require = createRequire(import.meta.url)
const clientDist = dirname(require.resolve('@codemode-gateway/client/package.json')) + sep + 'dist'
const capnwebDist = dirname(createRequire(join(clientDist, 'index.js')).resolve('capnweb'))

/** URL prefixes and the folders they serve. */
const roots = [['/client/', clientDist], ['/capnweb/', capnwebDist], ['/', here]]
const types = { '.html': 'text/html', '.mjs': 'text/javascript', '.js': 'text/javascript', '.map': 'application/json' }

/**
 * Starts the page's server on host:port (port 0 picks a free one) and
 * resolves with its address.
 * @param {{ host?: string, port?: number }} [options]
 */
export function serveBrowserExample({ host = '127.0.0.1', port = 8081 } = {}) {
  const server = createServer(async (req, res) => {
    const path = new URL(req.url ?? '/', 'http://page').pathname
    const file = path === '/' ? '/index.html' : path
    for (const [prefix, root] of roots) {
      if (!file.startsWith(prefix)) continue
      const full = normalize(join(root, file.slice(prefix.length)))
      if (!full.startsWith(root + sep)) break // no way out of the served folders
      try {
        const body = await readFile(full)
        const ext = full.slice(full.lastIndexOf('.'))
        res.writeHead(200, { 'content-type': types[/** @type {keyof typeof types} */ (ext)] ?? 'application/octet-stream' })
        res.end(body)
        return
      } catch {
        break
      }
    }
    res.writeHead(404).end('not found')
  })
  return new Promise((resolve) => {
    server.listen(port, host, () => {
      const a = /** @type {import('node:net').AddressInfo} */ (server.address())
      resolve({ url: `http://${host}:${a.port}/`, close: () => new Promise((done) => server.close(done)) })
    })
  })
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { url } = await serveBrowserExample()
  console.log(`the browser example is at ${url}`)
}
