import { loadConfig } from './config/ledger-config.js';
import { checkConfigurationFiles } from './config/startup-checks.js';
import { failureText } from './database/embedded-postgres.js';

async function main(): Promise<void> {
  const config = loadConfig(process.env);
  // Every file the configuration names is read before anything starts: a bad one leaves nothing running.
  await checkConfigurationFiles(config, process.env);
  // The application's modules (most of a start-up) load only once the configuration is known to be good.
  const { serve } = await import('./serve.js');
  await serve(config);
}

main().catch((error: unknown) => {
  console.error(failureText(error));
  process.exit(1);
});
