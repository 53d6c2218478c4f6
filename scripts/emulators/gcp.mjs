// Installs the gcp emulators (owned by the gcp issue). Filled in by that work.
export async function install() {}
