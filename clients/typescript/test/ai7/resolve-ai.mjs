// Loaded with --import before ai.test.mjs: every import of ai (and its
// subpaths) resolves to the ai 7 installed in this directory, so that the
// package's adapter, built against the package's own ai 6, runs on ai 7.
import { registerHooks } from 'node:module'

const here = new URL('package.json', import.meta.url).href

registerHooks({
  resolve(specifier, context, nextResolve) {
    if (specifier === 'ai' || specifier.startsWith('ai/')) return nextResolve(specifier, { ...context, parentURL: here })
    return nextResolve(specifier, context)
  },
})
