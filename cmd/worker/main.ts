import { loadConfig } from '../../internal/config/config';
import { main } from '../../internal/app/runtime';

await main(loadConfig(), { api: false, worker: true });
