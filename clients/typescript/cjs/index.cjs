'use strict'
module.exports = require('./load.cjs')('@codemode-gateway/client', () => require('../dist/index.js'))
