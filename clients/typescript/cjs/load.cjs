'use strict'
// The package is ES modules. Node.js 20.19 and later require() them as they
// are; an older Node.js refuses with ERR_REQUIRE_ESM, which these CommonJS
// entry points turn into one sentence saying what to do instead.
module.exports = function load(specifier, requireIt) {
  try {
    return requireIt()
  } catch (err) {
    if (err && (err.code === 'ERR_REQUIRE_ESM' || err.code === 'ERR_REQUIRE_ASYNC_MODULE')) {
      throw new Error(`${specifier} is an ES module package: use import, or await import('${specifier}') from CommonJS (require() of it needs Node.js 20.19 or later)`, { cause: err })
    }
    throw err
  }
}
