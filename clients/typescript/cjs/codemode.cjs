'use strict'
module.exports = require('./load.cjs')('@codemode-gateway/client/codemode', () => require('../dist/adapters/codemode.js'))
