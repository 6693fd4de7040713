// Checks TypeScript projects as `tsc -p` does, one after another in one
// process, emitting what a project emits and printing its diagnostics:
// node test/typecheck.mjs tsconfig.json tsconfig.types.json ... exits 1
// when any project has one. A file is parsed once for every project whose
// options parse it alike (the key TypeScript's language service shares
// files by): tsc run once a project parsed the DOM's and Node.js's
// declarations each time, about half of its 6 CPU-s.
import ts from 'typescript'

const registry = ts.createDocumentRegistry()
const parsed = new Map()
const formatHost = {
  getCanonicalFileName: (f) => f,
  getCurrentDirectory: ts.sys.getCurrentDirectory,
  getNewLine: () => ts.sys.newLine,
}

let failed = false
for (const project of process.argv.slice(2)) {
  const config = ts.getParsedCommandLineOfConfigFile(project, undefined, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => report(project, [d]),
  })
  if (!config) {
    failed = true
    continue
  }
  const host = ts.createCompilerHost(config.options)
  const settings = registry.getKeyForCompilationSettings(config.options)
  const parse = host.getSourceFile
  host.getSourceFile = (fileName, how, onError, fresh) => {
    const opts = typeof how === 'object' ? how : { languageVersion: how }
    const key = [settings, fileName, opts.languageVersion, opts.impliedNodeFormat, opts.jsDocParsingMode].join('\0')
    let file = fresh ? undefined : parsed.get(key)
    if (!file) {
      file = parse(fileName, how, onError, fresh)
      if (file) parsed.set(key, file)
    }
    return file
  }
  const program = ts.createProgram({
    rootNames: config.fileNames,
    options: config.options,
    projectReferences: config.projectReferences,
    configFileParsingDiagnostics: ts.getConfigFileParsingDiagnostics(config),
    host,
  })
  const diagnostics = [...ts.getPreEmitDiagnostics(program), ...program.emit().diagnostics]
  report(project, ts.sortAndDeduplicateDiagnostics(diagnostics))
}
process.exitCode = failed ? 1 : 0

function report(project, diagnostics) {
  if (diagnostics.length === 0) return
  failed = true
  const format = process.stdout.isTTY ? ts.formatDiagnosticsWithColorAndContext : ts.formatDiagnostics
  process.stdout.write(`${project}:\n` + format(diagnostics, formatHost))
}
