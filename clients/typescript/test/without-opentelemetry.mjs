// Resolve hooks (module.register) of an application that does not install
// the optional peer @opentelemetry/api: it cannot be found.
export async function resolve(specifier, context, nextResolve) {
  if (specifier === '@opentelemetry/api' || specifier.startsWith('@opentelemetry/api/')) {
    throw Object.assign(new Error(`Cannot find package '${specifier}' (hidden by the test)`), { code: 'ERR_MODULE_NOT_FOUND' })
  }
  return nextResolve(specifier, context)
}
