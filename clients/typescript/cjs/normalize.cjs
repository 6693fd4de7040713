'use strict'
module.exports = require('./load.cjs')('@codemode-gateway/client/normalize', () => require('../dist/adapters/normalize.js'))
