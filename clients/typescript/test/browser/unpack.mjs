// Unpacks the headless Chromium that @sparticuz/chromium carries in its npm
// tarball (brotli-compressed, with the NSS libraries it links) into
// chromium/, and writes chromium/chromium: a script that starts it with
// those libraries, for the browser test to launch (CHROMIUM, or found there
// by clients/typescript/browser_test.go). Only the binary is used: the
// package's own code wants Node.js 22 and a serverless /tmp layout.
import { execFileSync } from 'node:child_process'
import { mkdirSync, readFileSync, rmSync, writeFileSync, renameSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { brotliDecompressSync } from 'node:zlib'

const here = dirname(fileURLToPath(import.meta.url))
const from = join(here, 'node_modules', '@sparticuz', 'chromium', 'bin')
const to = join(here, 'chromium')
const partial = `${to}.partial`

rmSync(partial, { recursive: true, force: true })
mkdirSync(partial)
writeFileSync(join(partial, 'chromium-bin'), brotliDecompressSync(readFileSync(join(from, 'chromium.br'))), { mode: 0o755 })
writeFileSync(join(partial, 'libs.tar'), brotliDecompressSync(readFileSync(join(from, 'al2023.tar.br'))))
execFileSync('tar', ['-xf', 'libs.tar'], { cwd: partial })
rmSync(join(partial, 'libs.tar'))
writeFileSync(join(partial, 'chromium'), `#!/bin/sh
# Chromium from @sparticuz/chromium with the libraries it was built against.
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/lib\${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/chromium-bin" "$@"
`, { mode: 0o755 })
// Renamed whole, so a stopped unpack never leaves a chromium/chromium that
// make would take for done.
rmSync(to, { recursive: true, force: true })
renameSync(partial, to)
console.log(`unpacked ${join(to, 'chromium')}`)
