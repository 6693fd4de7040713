// What the executor servers written in JavaScript (../js-executor-server.mjs
// on node:vm, ../peers/ivm-executor-server.mjs on isolated-vm) share: the
// contract's constants and faults, the part of ExecutorApi that neither
// varies (the version, the outbound modes, no retained handles), and the
// loopback listener. Only how a program runs differs between them.
import { WebSocketServer, WebSocket } from 'ws'

// capnweb reads the global WebSocket, which Node 20 lacks.
if (typeof globalThis.WebSocket === 'undefined') globalThis.WebSocket = WebSocket
const { newWebSocketRpcSession, RpcTarget } = await import('capnweb')

export const PROTOCOL_VERSION = 1
export const PAYLOAD_LIMIT = 131072

// fault is an error carrying one of the contract's fault codes.
export function fault(code, message) {
  const err = new Error(message)
  err.code = code
  return err
}

function handlesClosed(executionId) {
  return fault('HANDLES_CLOSED', `Execution "${executionId}" holds no handles: they were closed, expired at the idle bound, or never granted. Execute again with retainHandles to get a fresh executionId.`)
}

// serveExecutor listens on 127.0.0.1 (the port is the first argument, else
// any) and serves each connection an ExecutorApi whose execute is run,
// called with execute's arguments once the outbound mode is known to be
// one of the contract's. It prints "listening on ws://127.0.0.1:PORT/".
export function serveExecutor(run) {
  class ExecutorApi extends RpcTarget {
    protocolVersion() {
      return PROTOCOL_VERSION
    }

    async execute(code, providers, options, dispatch, outboundMode, outbound) {
      if (!['native', 'stub', 'disabled'].includes(outboundMode)) {
        throw fault('PROTOCOL_MISMATCH', `unknown outboundMode ${JSON.stringify(outboundMode)}`)
      }
      return run(code, providers, options, dispatch, outboundMode, outbound)
    }

    invokeHandle(executionId) {
      throw handlesClosed(executionId)
    }

    closeHandles(executionId) {
      throw handlesClosed(executionId)
    }
  }
  const wss = new WebSocketServer({ host: '127.0.0.1', port: Number(process.argv[2] ?? 0) })
  wss.on('connection', (ws) => newWebSocketRpcSession(ws, new ExecutorApi()))
  wss.on('listening', () => console.log(`listening on ws://127.0.0.1:${wss.address().port}/`))
}
