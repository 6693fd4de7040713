'use strict'
module.exports = require('./load.cjs')('@codemode-gateway/client/ai', () => require('../dist/adapters/ai.js'))
