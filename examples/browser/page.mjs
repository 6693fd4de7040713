// @ts-check
// The browser example's script: connects with the subprotocol credential
// and runs the program of the page, whose one tool answers from the page.
import { RemoteExecutor, ExecutorFault, createEnvelopeDispatch, ToolNotFoundError } from '@codemode-gateway/client'

const $ = (/** @type {string} */ id) => /** @type {HTMLInputElement} */ (document.getElementById(id))
const params = new URLSearchParams(location.search)
$('url').value = params.get('url') ?? 'ws://127.0.0.1:8080/v1/executor'
$('key').value = params.get('key') ?? 'cmk_demo_local_only_never_deploy_this_key' // make run's local-only demo key

/** @param {'running' | 'done' | 'error'} state @param {string} text */
function show(state, text) {
  const out = $('output')
  out.dataset.state = state
  out.textContent = text
}

$('run').addEventListener('click', async () => {
  show('running', 'Running…')
  try {
    // In a browser the credential goes as a subprotocol entry by default.
    const executor = await RemoteExecutor.connect({ url: $('url').value, apiKey: $('key').value, reconnect: false })
    try {
      const r = await executor.execute({
        code: $('code').value,
        providers: [{ name: 'page', tools: ['title'] }],
        dispatch: createEnvelopeDispatch({ active: true }, (_provider, tool) => {
          if (tool === 'title') return document.title
          throw new ToolNotFoundError(tool)
        }),
        outbound: null,
        timeout: 5000,
      })
      show(r.error === undefined ? 'done' : 'error', JSON.stringify(r, null, 2))
    } finally {
      await executor.dispose()
    }
  } catch (err) {
    show('error', err instanceof ExecutorFault ? `${err.code}: ${err.message}` : String(err))
  }
})
