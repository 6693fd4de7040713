'use strict'
module.exports = require('./load.cjs')('@codemode-gateway/client/mcp', () => require('../dist/adapters/mcp.js'))
