// The executor contract's declarations, in-language and on the wire.

/** One provider of tools the entry module declares as a proxy. */
export type ProviderDescriptor = {
  name: string
  tools: string[]
  /** How the generated proxy passes call arguments: true sends every argument as a list. */
  positionalArgs?: boolean
  /** Source that runs after every proxy is declared. */
  prelude?: string
  /** Source that replaces the generated proxy for this provider. */
  proxySource?: string
}

/**
 * Receives every tool call: the provider, the tool, and the arguments as one
 * dispatch-JSON string. Answers with the envelope JSON:
 * `{"result": value}` or `{"error": text}`.
 */
export type ToolDispatchFn = (provider: string, tool: string, argsJson: string) => Promise<string>

/** A module map: a source string, or an object with exactly one kind. */
export type ModuleSource =
  | string
  | { js: string }
  | { cjs: string }
  | { text: string }
  | { json: unknown }
  | { data: string | Uint8Array }
export type ModuleMap = Record<string, ModuleSource>

/** A serialized request crossing to an outbound function or a retained handle. */
export type OutboundRequestMessage = {
  method: string
  url: string
  headers: Array<[string, string]>
  body: ArrayBuffer | null
}

/** A serialized response. */
export type OutboundResponseMessage = {
  status: number
  statusText: string
  headers: Array<[string, string]>
  body: ArrayBuffer
}

export type OutboundFetchFn = (req: OutboundRequestMessage) => Promise<OutboundResponseMessage>

/** The wire name of the request's outbound setting. */
export type OutboundMode = 'native' | 'stub' | 'disabled'

export type LogLine = {
  level: 'log' | 'warn' | 'error'
  text: string
}

/** One execution. `code` is the only field a request must set. */
export type ExecuteRequest = {
  code: string
  providers?: ProviderDescriptor[]
  dispatch?: ToolDispatchFn
  modules?: ModuleMap
  /** Milliseconds; null lifts the bound to the largest the server supports. */
  timeout?: number | null
  countHostWaits?: boolean
  /** Absent: native. A function: stub. null: disabled. */
  outbound?: OutboundFetchFn | null
  retainHandles?: boolean
}

export type ExecuteResult = {
  result?: unknown
  error?: string
  logs?: LogLine[]
  /** Present only when retainHandles was honoured. */
  executionId?: string
  /** The handle names invokeHandle accepts. */
  handles?: string[]
  /** What the execution used, when the executor reports it (the gateway's extension). */
  usage?: Usage
}

/**
 * What one execution used: the optional `usage` member of the result
 * message, an extension of the contract that this gateway's executors
 * send and other clients ignore. Durations are milliseconds.
 */
export type Usage = {
  /** Time on the run clock (host waits excluded unless countHostWaits). */
  runClockMs: number
  /** CPU time the executor spent while the run held it, garbage collection included. */
  cpuMs: number
  /** The largest heap the run was charged, as its memory limit is enforced (bounds the live peak from above). */
  peakHeapBytes: number
  toolCalls: number
  outboundRequests: number
  /** Bytes of console text captured. */
  logBytes: number
}

/** The contract's in-language executor. */
export interface Executor {
  execute(request: ExecuteRequest): Promise<ExecuteResult>
  invokeHandle(executionId: string, handleName: string, request: OutboundRequestMessage): Promise<OutboundResponseMessage>
  closeHandles(executionId: string): Promise<void>
  dispose(): Promise<void>
}

/** The options argument of `ExecutorApi.execute`. Modules cross as [name, source] pairs. */
export type ExecuteCallOptions = {
  timeout?: number | null
  countHostWaits?: boolean
  retainHandles?: boolean
  modules?: Array<[string, ModuleSource]>
  /** W3C Trace Context of the caller (the gateway's extension; other servers ignore it). */
  traceparent?: string
  tracestate?: string
}

/** What `ExecutorApi.execute` returns: the run's value as the JSON text the isolate produced. */
export type ExecuteResultMessage = {
  resultJson?: string
  error?: string
  logs?: LogLine[]
  executionId?: string
  handles?: string[]
  usage?: Usage
}

/**
 * The contract on the wire: the main interface an executor server exports
 * over a capnweb session, so `newWebSocketRpcSession<ExecutorApi>(url)`
 * gives a typed stub.
 */
export type ExecutorApi = {
  protocolVersion(): Promise<number>
  execute(
    code: string,
    providers: ProviderDescriptor[],
    options: ExecuteCallOptions,
    dispatch: ToolDispatchFn | null,
    outboundMode: OutboundMode,
    outbound?: OutboundFetchFn,
  ): Promise<ExecuteResultMessage>
  /** The fourth argument is the gateway's extension; other servers ignore it. */
  invokeHandle(executionId: string, handleName: string, request: OutboundRequestMessage, options?: InvokeCallOptions): Promise<OutboundResponseMessage>
  closeHandles(executionId: string): Promise<void>
}

/** The optional options argument of `ExecutorApi.invokeHandle`: the caller's W3C Trace Context. */
export type InvokeCallOptions = {
  traceparent?: string
  tracestate?: string
}

/** Options of one call of `RemoteExecutor`. */
export type CallOptions = {
  /** Aborting rejects the call at once with the signal's reason. */
  signal?: AbortSignal
  /**
   * The caller's W3C Trace Context for this execution or invocation: the
   * gateway's spans for it join that trace. Absent (both members), the
   * client sends OpenTelemetry's active context when @opentelemetry/api is
   * installed and a propagator is registered.
   */
  traceparent?: string
  tracestate?: string
}

/** An executor's execute, with the per-call options RemoteExecutor takes; what the adapters need. */
export interface ExecuteTarget {
  execute(request: ExecuteRequest, options?: CallOptions): Promise<ExecuteResult>
}
