// Checks protocol/testdata/dispatch-vectors.json against real JavaScript.
//
//   node check-vectors.mjs [file]        check every vector (of file, by default
//                                        dispatch-vectors.json), exit 1 on a mismatch
//   node check-vectors.mjs --numbers     read a JSON array of float64 bit
//                                        patterns (16 hex digits) on stdin and
//                                        print [String(x), JSON.stringify(x)]
//                                        for each
//   node check-vectors.mjs --strings     read a JSON array of arrays of UTF-16
//                                        code units on stdin and print
//                                        JSON.stringify of each string
//
// For each vector, `js` is evaluated in a fresh vm context in which codec.js
// was run, and __stringifyForDispatch of the value must equal `json`. Then
// __stringifyForDispatch(__parseForDispatch(json)) must equal `reparsed`
// when the vector has one (a typed array other than Uint8Array decays to
// bytes), and `json` itself otherwise.
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import vm from 'node:vm'

const here = dirname(fileURLToPath(import.meta.url))

function readStdin() {
  return readFileSync(0, 'utf8')
}

if (process.argv[2] === '--numbers') {
  const view = new DataView(new ArrayBuffer(8))
  const out = JSON.parse(readStdin()).map((hex) => {
    view.setBigUint64(0, BigInt('0x' + hex))
    const x = view.getFloat64(0)
    return [String(x), JSON.stringify(x)]
  })
  process.stdout.write(JSON.stringify(out))
} else if (process.argv[2] === '--strings') {
  const out = JSON.parse(readStdin()).map((units) => JSON.stringify(String.fromCharCode(...units)))
  process.stdout.write(JSON.stringify(out))
} else {
  checkVectors()
}

function checkVectors() {
  const codec = readFileSync(join(here, 'codec.js'), 'utf8')
  const vectorsFile = process.argv[2] ?? join(here, 'dispatch-vectors.json')
  const vectors = JSON.parse(readFileSync(vectorsFile, 'utf8'))
  let failures = 0
  for (const v of vectors) {
    const context = vm.createContext({})
    vm.runInContext(codec, context, { filename: 'codec.js' })
    context.__vectorJSON = v.json
    let written
    let reparsed
    try {
      written = vm.runInContext(`__stringifyForDispatch((${v.js}))`, context, { filename: v.name })
      reparsed = vm.runInContext('__stringifyForDispatch(__parseForDispatch(__vectorJSON))', context)
    } catch (err) {
      console.log(`FAIL ${v.name}: ${err}`)
      failures++
      continue
    }
    if (written !== v.json) {
      console.log(`FAIL ${v.name}: JavaScript wrote\n  ${JSON.stringify(written)}\nthe vector says\n  ${JSON.stringify(v.json)}`)
      failures++
    }
    const want = v.reparsed ?? v.json
    if (reparsed !== want) {
      console.log(`FAIL ${v.name}: parsed and written again gives\n  ${JSON.stringify(reparsed)}\nexpected\n  ${JSON.stringify(want)}`)
      failures++
    }
  }
  if (failures > 0) {
    console.log(`${failures} of ${vectors.length} vectors disagree with JavaScript`)
    process.exitCode = 1
    return
  }
  console.log(`ok: ${vectors.length} vectors agree with JavaScript`)
}
