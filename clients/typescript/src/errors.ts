// The failure grammar: one class per declared failure, each composing its
// own text in its constructor (word for word the Go protocol package's),
// the fault taxonomy, and rehydrateExecutorError.

/** The fault taxonomy: the code property of every thrown failure. */
export const FAULT_CODES = [
  'QUEUE_OVERFLOW',
  'WORKER_CRASHED',
  'PROTOCOL_MISMATCH',
  'CONNECTION_REJECTED',
  'CONNECTION_BROKEN',
  'RESPONSE_TOO_LARGE',
  'HANDLES_CLOSED',
  'INTERNAL',
] as const
export type FaultCode = (typeof FAULT_CODES)[number]

export function isFaultCode(code: unknown): code is FaultCode {
  return typeof code === 'string' && (FAULT_CODES as readonly string[]).includes(code)
}

/** The own property that carries a refusal's retry hint, in milliseconds, beside its code. */
export const RETRY_AFTER_PROP = 'retryAfterMs'

/**
 * A thrown failure with a code from the taxonomy: the infrastructure broke
 * under an execution. Other own properties that crossed the wire are kept.
 */
export class ExecutorFault extends Error {
  readonly code: FaultCode;
  [prop: string]: unknown

  constructor(code: FaultCode, message: string, props?: Record<string, unknown>) {
    super(message)
    this.name = new.target.name
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (k !== 'message' && k !== 'stack' && k !== 'name' && k !== 'code') {
          Object.defineProperty(this, k, { value: v, enumerable: true, writable: true, configurable: true })
        }
      }
    }
    this.code = code
  }

  /** QUEUE_OVERFLOW and WORKER_CRASHED: nothing ran to completion, and a later attempt can succeed. */
  get retryable(): boolean {
    return this.code === 'QUEUE_OVERFLOW' || this.code === 'WORKER_CRASHED'
  }

  /** The retry hint in milliseconds a QUEUE_OVERFLOW refusal carried, when it carried one. */
  retryAfter(): number | undefined {
    const v = this[RETRY_AFTER_PROP]
    return typeof v === 'number' && v >= 0 ? v : undefined
  }
}

/** A declared failure: text the model reads in-band, composed by its class. */
export class DeclaredFailure extends Error {
  constructor(message: string) {
    super(message)
    this.name = new.target.name
  }
}

const list = (names: readonly string[]): string => (names.length === 0 ? '(none)' : names.join(', '))
const sorted = (names: readonly string[]): string[] => [...names].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))

/** Whether text opens with the whole first sentence of a bound's text, then ends or continues after white space. */
function opensWith(text: string, before: string, after: string): boolean {
  if (!text.startsWith(before)) return false
  let i = before.length
  const digits = i
  while (i < text.length && text.charCodeAt(i) >= 48 && text.charCodeAt(i) <= 57) i++
  if (i === digits || (text[digits] === '0' && i - digits > 1)) return false
  if (!text.startsWith(after, i)) return false
  const next = text[i + after.length]
  return next === undefined || SENTENCE_BREAKS.includes(next)
}

/** What may follow a first sentence: RE2's \s, ASCII white space only. */
const SENTENCE_BREAKS = ['\t', '\n', '\f', '\r', ' ']

export class ExecutionTimeoutError extends DeclaredFailure {
  constructor(readonly timeoutMs: number) {
    super(`Execution timed out at its ${timeoutMs} ms bound. Do less work per run and return the part that is already finished.`)
  }

  /** Whether text opens with the whole first sentence of the timeout text, "Execution timed out at its <n> ms bound.". */
  static matches(text: string): boolean {
    return opensWith(text, 'Execution timed out at its ', ' ms bound.')
  }
}

export class MemoryLimitError extends DeclaredFailure {
  constructor(readonly limitMB: number) {
    super(`Execution ran out of memory at its ${limitMB} MB limit. Work through the data in smaller pieces and keep only what you return.`)
  }

  /** Whether text opens with the whole first sentence of the memory text. */
  static matches(text: string): boolean {
    return opensWith(text, 'Execution ran out of memory at its ', ' MB limit.')
  }
}

export class OutboundDisabledError extends DeclaredFailure {
  constructor() {
    super('Outbound fetch is disabled for this execution. Anything this run needs from outside has to arrive through a tool call.')
  }
}

export class ModuleNotFoundError extends DeclaredFailure {
  readonly declared: string[]
  constructor(readonly moduleName: string, declared: readonly string[]) {
    super(`Module "${moduleName}" is not in the module map. Import one of the names it declares: ${list(sorted(declared))}.`)
    this.declared = sorted(declared)
  }
}

export class ModuleKeyCollisionError extends DeclaredFailure {
  readonly colliding: string[]
  constructor(readonly key: string, colliding: readonly string[]) {
    const names = sorted(colliding)
    const distinct = names.filter((n, i) => i === 0 || n !== names[i - 1]).map((n) => `"${n}"`)
    super(
      distinct.length < 2
        ? `Module name "${key}" appears more than once, so the module map is ambiguous. Keep one entry under that name.`
        : `Module names ${distinct.slice(0, -1).join(', ')} and ${distinct[distinct.length - 1]} ${distinct.length > 2 ? 'all' : 'both'} name the module "${key}", so the module map is ambiguous. Keep one of them, or rename the others so the names differ once a leading "./" is removed.`,
    )
    this.colliding = names
  }
}

export class UnsupportedModuleKindError extends DeclaredFailure {
  constructor(readonly moduleName: string, readonly kind: string) {
    super(`Module "${moduleName}" has the unsupported kind "${kind}". Give each module as a source string or as an object with exactly one of js, cjs, text, json or data.`)
  }
}

/** The four parts of what a run sends outward, each bounded by PAYLOAD_LIMIT. */
export type PayloadPart = "run's answer" | 'tool call' | 'outbound request' | 'handle answer'
const PAYLOAD_ADVICE: Record<PayloadPart, string> = {
  "run's answer": 'Return a smaller value, and fetch the rest in a later run.',
  'tool call': 'Pass smaller arguments, or split the call into several smaller ones.',
  'outbound request': 'Send a smaller body, or split it across several requests.',
  'handle answer': 'Answer with a smaller response, or split it across several requests.',
}

export class PayloadTooLargeError extends DeclaredFailure {
  constructor(readonly part: PayloadPart, readonly size: number, readonly limit: number) {
    super(`The ${part} is ${size} bytes, past the ${limit}-byte bound on one part a run sends. ${PAYLOAD_ADVICE[part] ?? 'Send less in one part.'}`)
  }
}

export class CompressionAbsentError extends DeclaredFailure {
  constructor(readonly absentName: string) {
    super(`${absentName} is absent from this runtime by design. The host applies content coding on the wire, so work with uncompressed bytes.`)
  }
}

export class BufferGrowthAbsentError extends DeclaredFailure {
  constructor(readonly absentName: string) {
    super(`${absentName} is absent from this runtime because a buffer that grows after it is created is allocated outside the memory limit this execution is metered against. Ask for the length you need when you create the buffer.`)
  }
}

export class CacheStorageAbsentError extends DeclaredFailure {
  constructor() {
    super('Cache storage is absent from this runtime because nothing survives an execution. Return what should persist in the result and take it back as an input on the next call.')
  }
}

export class HandleNotFoundError extends DeclaredFailure {
  readonly granted: string[]
  constructor(readonly executionId: string, readonly handleName: string, granted: readonly string[]) {
    super(`Execution "${executionId}" has no handle named "${handleName}". The granted handles are: ${list(granted)}.`)
    this.granted = [...granted]
  }
}

export class ToolNotFoundError extends DeclaredFailure {
  constructor(readonly tool: string) {
    super(`Tool "${tool}" not found`)
  }
}

export class InvalidProviderNameError extends DeclaredFailure {
  constructor(readonly providerName: string) {
    super(`Provider name "${providerName}" cannot be declared, because a provider name is made of ASCII letters, digits, _ and $ and does not start with a digit. Rename the provider to a name of that form.`)
  }
}

export class KeywordProviderNameError extends DeclaredFailure {
  constructor(readonly providerName: string) {
    super(`Provider name "${providerName}" cannot be declared, because it is an ECMAScript reserved word in strict code. Rename the provider to a name that is not a reserved word.`)
  }
}

export class ReservedProviderNameError extends DeclaredFailure {
  /** reason is the group the sandbox reserves the name for, as the server's reserved set gives it. */
  constructor(readonly providerName: string, readonly reason = 'the entry scope') {
    super(`Provider name "${providerName}" is reserved by the sandbox scope for ${reason}, so a provider cannot shadow it. Rename the provider to a name the scope does not reserve.`)
  }
}

export class DuplicateProviderNameError extends DeclaredFailure {
  constructor(readonly providerName: string) {
    super(`Provider name "${providerName}" is declared more than once, so the entry module cannot declare it. Merge the tools into one descriptor, or rename one of the providers.`)
  }
}

export class InvalidTimeoutError extends DeclaredFailure {
  constructor(readonly millis: number) {
    super(`Timeout ${String(millis)} is not a positive number of milliseconds, so the run has no bound to keep. Leave the timeout out for the default, set null for the largest bound, or give a positive number.`)
  }
}

// ---- declared failures that are faults ------------------------------------

// ---- the executor's own texts -------------------------------------------------
// Not quoted by the contract; composed in its grammar by the Go executor.

/** What the sandbox names in a source bound's text: "program", `module "a"`, `provider "store"`. */
export class SourceTooLargeError extends DeclaredFailure {
  constructor(readonly what: string, readonly size: number, readonly limit: number) {
    super(`The ${what} is ${size} bytes, past the sandbox's ${limit}-byte bound on one source. Send less code, and move what is shared into the module map.`)
  }
}

export class SourceNestingError extends DeclaredFailure {
  constructor(readonly what: string, readonly limit: number, readonly line: number) {
    super(`The ${what} nests brackets more than ${limit} deep (line ${line}), past what the sandbox parses. Flatten that code and run it again.`)
  }
}

export class HostCallBacklogError extends DeclaredFailure {
  constructor(readonly limit: number) {
    super(`Too many host calls in flight: at most ${limit} may wait at once. Await some before starting more.`)
  }
}

export class HostAnswerTooLargeError extends DeclaredFailure {
  constructor() {
    super("The host's answer is too large to deliver to the sandbox. Ask the tool for less at once.")
  }
}

export class NotAResponseError extends DeclaredFailure {
  constructor() {
    super('The fetch handler answered with something other than a Response. Return a Response, for example new Response(body, {status: 200}).')
  }
}

export class NetworkErrorResponseError extends DeclaredFailure {
  constructor() {
    super('The fetch handler answered with Response.error(), a network error, not an HTTP response. Return a Response with a status from 200 to 599.')
  }
}

/** What an executor could not deliver to its worker process. */
export type DeliveryPart = 'execution' | 'handle request'

/** An execution or handle request too large for the executor's worker pipe: INTERNAL, met only in process. */
export class DeliveryTooLargeError extends ExecutorFault {
  constructor(readonly part: DeliveryPart, readonly size: number, readonly limit: number, props?: Record<string, unknown>) {
    const advice = part === 'handle request' ? 'Send a smaller body.' : 'Send less code, and fewer or smaller modules.'
    super('INTERNAL', `The ${part} is ${size} bytes, past the ${limit}-byte bound on one message to the executor's worker process, so it was not delivered. ${advice}`, props)
  }
}

/** A draining gateway turned the execution away before it started; QUEUE_OVERFLOW, so retryable. */
export class DrainingError extends ExecutorFault {
  constructor(props?: Record<string, unknown>) {
    super('QUEUE_OVERFLOW', 'This gateway is draining for a restart, so the execution was turned away before it started. Retry it; another replica, or this one after the restart, will run it.', props)
  }
}

/** A draining executor server turned the execution away before it started; QUEUE_OVERFLOW, so retryable. */
export class ExecutorDrainingError extends ExecutorFault {
  constructor(props?: Record<string, unknown>) {
    super('QUEUE_OVERFLOW', 'This executor server is draining for a restart, so the execution was turned away before it started. Retry it; another executor server, or this one after the restart, will run it.', props)
  }
}

/**
 * No executor server behind a gateway could take the execution (each down,
 * refusing the gateway's connection, or none found); QUEUE_OVERFLOW, so
 * retryable: it heals once a server is back.
 */
export class NoExecutorError extends ExecutorFault {
  constructor(props?: Record<string, unknown>) {
    super('QUEUE_OVERFLOW', 'No executor server behind this gateway could take the execution, so it did not start. Retry it in a few seconds; an executor server that is down or restarting takes executions again once it is back.', props)
  }
}

/**
 * A gateway could not reach the executor server that holds a retained
 * execution's handles, so the handle call did not start; QUEUE_OVERFLOW, so
 * retryable. A server that restarted meanwhile lost the handles, and the
 * retry throws HandlesClosedError.
 */
export class HandlesUnreachableError extends ExecutorFault {
  constructor(props?: Record<string, unknown>) {
    super('QUEUE_OVERFLOW', "The executor server that holds this execution's handles could not be reached, so the call did not start. Retry it in a few seconds; if that server restarted meanwhile, its handles are gone and the retry reads HANDLES_CLOSED.", props)
  }
}

const wholeMs = (ms: number): number => Math.max(1, Math.ceil(ms))
const retrySentence = (ms: number): string => ` Try it again in ${ms} ms.`

export class HandlesClosedError extends ExecutorFault {
  constructor(readonly executionId: string, props?: Record<string, unknown>) {
    super('HANDLES_CLOSED', `Execution "${executionId}" holds no handles: they were closed, expired at the idle bound, or never granted. Execute again with retainHandles to get a fresh executionId.`, props)
  }
}

export class QueueOverflowError extends ExecutorFault {
  constructor(readonly bound: number, retryAfterMs: number, props?: Record<string, unknown>) {
    const retry = wholeMs(retryAfterMs)
    super('QUEUE_OVERFLOW', `The executor's queue is full at its bound of ${bound} waiting executions, so this one was turned away before it ran.${retrySentence(retry)}`, { ...props, [RETRY_AFTER_PROP]: retry })
  }
}

export class QueueTimeoutError extends ExecutorFault {
  readonly waitedMs: number
  constructor(waitedMs: number, retryAfterMs: number, props?: Record<string, unknown>) {
    const retry = wholeMs(retryAfterMs)
    const waited = wholeMs(waitedMs)
    super('QUEUE_OVERFLOW', `This execution waited its bound of ${waited} ms for room on the executor, so it was turned away before it ran.${retrySentence(retry)}`, { ...props, [RETRY_AFTER_PROP]: retry })
    this.waitedMs = waited
  }
}

export class TenantLimitError extends ExecutorFault {
  constructor(readonly tenant: string, readonly limit: string, retryAfterMs: number, props?: Record<string, unknown>) {
    const retry = wholeMs(retryAfterMs)
    super('QUEUE_OVERFLOW', `Tenant "${tenant}" is at its bound of ${limit}, so this execution was turned away before it started.${retrySentence(retry)}`, { ...props, [RETRY_AFTER_PROP]: retry })
  }
}

export class ResponseTooLargeError extends ExecutorFault {
  constructor(readonly size: number, readonly limit: number, props?: Record<string, unknown>) {
    super('RESPONSE_TOO_LARGE', `The response is ${size} bytes, past the server's response limit of ${limit} bytes, so it was not delivered. Return less in one result or response, and fetch the rest in another call.`, props)
  }
}

// ---- rehydration ------------------------------------------------------------

/** The whole decimal a Go strconv.Itoa writes, or undefined. */
function canonicalInt(text: string): number | undefined {
  if (!/^(0|-?[1-9][0-9]*)$/.test(text)) return undefined
  const n = Number(text)
  return Number.isSafeInteger(n) ? n : undefined
}

function between(text: string, prefix: string, suffix: string): string | undefined {
  return text.length >= prefix.length + suffix.length && text.startsWith(prefix) && text.endsWith(suffix)
    ? text.slice(prefix.length, text.length - suffix.length)
    : undefined
}

/** Splits the retry sentence off a queue or tenant-bound text. */
function cutRetry(message: string): [string, number] | undefined {
  const body = between(message, '', ' ms.')
  if (body === undefined) return undefined
  const i = body.lastIndexOf(' Try it again in ')
  if (i < 0) return undefined
  const ms = canonicalInt(body.slice(i + ' Try it again in '.length))
  return ms !== undefined && ms >= 1 ? [body.slice(0, i), ms] : undefined
}

function rebuildQueueFailure(message: string, props: Record<string, unknown>): ExecutorFault | undefined {
  // The refusals that carry no retry hint have one text each.
  for (const Hintless of [DrainingError, ExecutorDrainingError, NoExecutorError, HandlesUnreachableError]) {
    const err = new Hintless(props)
    if (err.message === message) return err
  }
  const cut = cutRetry(message)
  if (!cut) return undefined
  const [rest, retry] = cut
  const bound = between(rest, "The executor's queue is full at its bound of ", ' waiting executions, so this one was turned away before it ran.')
  if (bound !== undefined) {
    const n = canonicalInt(bound)
    return n === undefined ? undefined : new QueueOverflowError(n, retry, props)
  }
  const waited = between(rest, 'This execution waited its bound of ', ' ms for room on the executor, so it was turned away before it ran.')
  if (waited !== undefined) {
    const n = canonicalInt(waited)
    return n === undefined || n <= 0 ? undefined : new QueueTimeoutError(n, retry, props)
  }
  const tenantLimit = between(rest, 'Tenant "', ', so this execution was turned away before it started.')
  if (tenantLimit !== undefined) {
    const at = tenantLimit.indexOf('" is at its bound of ')
    if (at >= 0) return new TenantLimitError(tenantLimit.slice(0, at), tenantLimit.slice(at + '" is at its bound of '.length), retry, props)
  }
  return undefined
}

function rebuild(code: FaultCode, message: string, props: Record<string, unknown>): ExecutorFault | undefined {
  switch (code) {
    case 'HANDLES_CLOSED': {
      const id = between(message, 'Execution "', '" holds no handles: they were closed, expired at the idle bound, or never granted. Execute again with retainHandles to get a fresh executionId.')
      return id === undefined ? undefined : new HandlesClosedError(id, props)
    }
    case 'QUEUE_OVERFLOW':
      return rebuildQueueFailure(message, props)
    case 'RESPONSE_TOO_LARGE': {
      const rest = between(message, 'The response is ', " bytes, so it was not delivered. Return less in one result or response, and fetch the rest in another call.")
      if (rest === undefined) return undefined
      const at = rest.indexOf(" bytes, past the server's response limit of ")
      if (at < 0) return undefined
      const size = canonicalInt(rest.slice(0, at))
      const limit = canonicalInt(rest.slice(at + " bytes, past the server's response limit of ".length))
      return size === undefined || limit === undefined ? undefined : new ResponseTooLargeError(size, limit, props)
    }
  }
  return undefined
}

/**
 * Rebuilds the typed failure a thrown error stood for. An error whose code is
 * in the taxonomy becomes an ExecutorFault: the declared failure's own class
 * (HandlesClosedError, QueueOverflowError, QueueTimeoutError,
 * TenantLimitError, DrainingError, ExecutorDrainingError, NoExecutorError,
 * HandlesUnreachableError, ResponseTooLargeError) when its message is exactly the
 * text that class composes, else a plain ExecutorFault with that code. The
 * message and the other own properties stay as they arrived. Anything else
 * (a throw from user code, a provider's rejection) passes through untouched.
 */
export function rehydrateExecutorError(err: unknown): unknown {
  if (err instanceof ExecutorFault) return err
  if (err === null || typeof err !== 'object') return err
  const { code } = err as { code?: unknown }
  if (!isFaultCode(code)) return err
  const props: Record<string, unknown> = {}
  for (const key of Object.keys(err)) if (key !== 'code' && key !== 'message' && key !== 'stack' && key !== 'name') props[key] = (err as Record<string, unknown>)[key]
  const messageValue = (err as { message?: unknown }).message
  const message = typeof messageValue === 'string' ? messageValue : String(messageValue ?? '')
  const typed = rebuild(code, message, props)
  // The class must compose exactly the message, or it would be a guess.
  if (typed && typed.message === message) return typed
  return new ExecutorFault(code, message, props)
}
