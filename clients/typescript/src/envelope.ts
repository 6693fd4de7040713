// The dispatch grammar's envelopes, composed around a tool implementation.
import { parseForDispatch, stringifyForDispatch } from './codec.js'
import { COMPLETED_TEXT } from './constants.js'
import type { ToolDispatchFn } from './types.js'

/** Whether the execution a dispatch serves is still running. Set active to false when it settles. */
export type EnvelopeState = { active: boolean }

/** Implements tools: one call, its arguments decoded by the argument grammar. */
export type ToolFn = (provider: string, tool: string, args: unknown[]) => unknown

/**
 * The argument grammar: an array is an argument list, the empty string an
 * empty list, and any other payload a single argument.
 */
export function argsFromJson(argsJson: string): unknown[] {
  if (argsJson === '') return []
  const v = parseForDispatch(argsJson)
  return Array.isArray(v) ? v : [v]
}

/** {"error": text}. */
export function errorEnvelope(text: string): string {
  return stringifyForDispatch({ error: text })!
}

/**
 * Composes the three envelopes of the dispatch grammar around fn: while
 * state is active `{"result": value}` (written by stringifyForDispatch, so `{}`
 * for undefined) or `{"error": text}` with the text of what fn threw; once
 * the execution has settled, the completed envelope without calling fn.
 * Arguments that do not parse and values that cannot be written answer
 * `{"error": …}` too, so the program's proxy rethrows where the call was made.
 */
export function createEnvelopeDispatch(state: EnvelopeState, fn: ToolFn): ToolDispatchFn {
  return async (provider, tool, argsJson) => {
    if (!state.active) return errorEnvelope(COMPLETED_TEXT)
    let args: unknown[]
    try {
      args = argsFromJson(argsJson)
    } catch (err) {
      return errorEnvelope(`The arguments of tool ${tool} are not valid dispatch JSON: ${messageOf(err)}`)
    }
    let value: unknown
    try {
      value = await fn(provider, tool, args)
    } catch (err) {
      return errorEnvelope(messageOf(err))
    }
    try {
      return stringifyForDispatch({ result: value })!
    } catch (err) {
      return errorEnvelope(`The answer of tool ${tool} cannot be written as JSON: ${messageOf(err)}`)
    }
  }
}

/** The text of a thrown value: an Error's message, anything else as a string. */
export function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message
  if (err !== null && typeof err === 'object' && typeof (err as { message?: unknown }).message === 'string') {
    return (err as { message: string }).message
  }
  return String(err)
}
