// Log lines as the code-mode dialects print them.
import type { LogLine } from '../types.js'

/** A log line as text: a log line as it reads, warn and error behind their `[warn]` and `[error]` prefixes. */
export function renderLogLine(line: LogLine): string {
  return line.level === 'log' ? line.text : `[${line.level}] ${line.text}`
}
