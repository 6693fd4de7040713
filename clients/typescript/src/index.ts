// @codemode-gateway/client: the executor contract in TypeScript, and
// RemoteExecutor, its client over a WebSocket to a codemode gateway.
export * from './constants.js'
export * from './types.js'
export * from './codec.js'
export * from './envelope.js'
export * from './errors.js'
export { RemoteExecutor, type RemoteExecutorOptions, type ReconnectOptions, type RetryOptions, type HandleRequest } from './remote-executor.js'
export { EXECUTOR_SUBPROTOCOL, BEARER_SUBPROTOCOL_PREFIX, type SocketFactory, type SocketLike } from './transport.js'
