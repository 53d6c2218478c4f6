/**
 * The region catalog: data only. Each row is one provider region with its
 * location and which of Tessera's building blocks the provider offers there.
 *
 * Read this before trusting a row:
 * - Availability changes. Rows say what the sources below said on the date
 *   given; `unconfirmed` marks what they did not settle. Before deploying,
 *   check with the provider: `aws lambda list-functions --region <r>` (any
 *   answer but an endpoint error), `gcloud functions regions list --gen2`,
 *   `gcloud firestore locations list`, `az functionapp list-flexconsumption-locations`.
 * - Coordinates are metro-area points, good to tens of kilometres: enough to
 *   rank regions by distance, not to locate a data centre. Azure's are the
 *   Resource Manager location metadata (`az account list-locations`); AWS and
 *   Google publish none, so theirs are the city the provider names.
 * - Compute ceilings and memory limits are not here: they live in
 *   shared/domain/ceilings.ts and reach the chooser through PLATFORM_SPECS.
 */
import type { AwsOffers, AwsRegion, AzureOffers, AzureRegion, CatalogSource, GcpOffers, GcpRegion, Offer } from './catalog.js';

export const CATALOG_SOURCES: readonly CatalogSource[] = [
  {
    id: 'aws-partitions',
    url: 'https://github.com/aws/aws-sdk-js-v3 (node_modules/@aws-sdk/core 3.981.2: submodules/client/util-endpoints/lib/aws/partitions.js)',
    read: '2026-12-01',
    covers: 'AWS region codes and names of the commercial partition',
  },
  {
    id: 'aws-lambda-endpoints',
    url: 'https://docs.aws.amazon.com/general/latest/gr/lambda-service.html',
    read: '2026-12-01',
    covers:
      'regions with a Lambda endpoint (seen: the long-standing regions, ap-south-2, ap-southeast-3/4/5). Lambda and DynamoDB are launched with every region; ' +
      'for the regions added in 2025 (ap-east-2, ap-southeast-6, me-west-1, sa-west-1) that was not confirmed and is marked unconfirmed',
  },
  {
    id: 'gcp-cloud-run-locations',
    url: 'https://cloud.google.com/run/docs/locations',
    read: '2026-12-01',
    covers:
      'regions of Cloud Run, which hosts Cloud Functions 2nd gen (Cloud Run functions); europe-north2 and northamerica-south1 were not in the copy read',
  },
  {
    id: 'gcp-functions-locations',
    url: 'https://firebase.google.com/docs/functions/locations and https://cloud.google.com/functions/docs/locations',
    read: '2026-12-01',
    covers: 'per-region "supported product versions" (1st gen / 2nd gen) of Cloud Functions',
  },
  {
    id: 'gcp-firestore-locations',
    url: 'https://cloud.google.com/firestore/native/docs/locations and https://cloud.google.com/firestore/docs/reference/rest/v1/projects.locations/get',
    read: '2026-12-01',
    covers: 'Firestore regional locations (multi-regions nam5/eur3 are not rows: the claims table lives in one region with its functions)',
  },
  {
    id: 'azure-locations',
    url: 'https://learn.microsoft.com/en-us/cli/azure/account#az-account-list-locations (Resource Manager location metadata)',
    read: '2026-12-01',
    covers:
      'Azure region codes, display names, coordinates; regions opened in 2025 (austriaeast, belgiumcentral, chilecentral, indonesiacentral, malaysiawest) have city coordinates',
  },
  {
    id: 'azure-flex-regions',
    url: 'https://github.com/Azure-Samples/functions-quickstart-dotnet-azd/blob/9633052b77118074acd46c97526bde5294283348/infra/main.bicep',
    read: '2026-12-01 (file last changed 2026-02-21)',
    covers:
      "regions where Flex Consumption is offered: the @allowed location list of Microsoft's own Flex Consumption quickstart. Microsoft documents the list only through " +
      '`az functionapp list-flexconsumption-locations`; regions missing from the sample are marked `no` and may have been added since',
  },
  {
    id: 'azure-premium-regions',
    url: 'https://learn.microsoft.com/en-us/powershell/module/az.functions/get-azfunctionappavailablelocation',
    read: '2026-12-01',
    covers:
      'example output of Get-AzFunctionAppAvailableLocation (Premium, Windows and Linux). Regions opened since 2022 and restricted-access regions are marked unconfirmed',
  },
  {
    id: 'azure-consumption-regions',
    url: 'https://learn.microsoft.com/en-us/azure/azure-functions/consumption-plan',
    read: '2026-12-01',
    covers:
      'Consumption plan (Windows; Linux Consumption takes no new regions and is retiring). Offered in the general-access regions; restricted-access and 2023+ regions unconfirmed',
  },
  {
    id: 'azure-http-timeout',
    url: 'https://learn.microsoft.com/en-us/azure/azure-functions/functions-scale#timeout',
    read: '2026-12-01',
    covers: "HTTP-triggered functions must answer within 230 s whatever the plan's functionTimeout (Azure Load Balancer idle timeout)",
  },
  {
    id: 'memory-sizes',
    url: 'https://cloud.google.com/functions/docs/configuring/memory; https://learn.microsoft.com/en-us/azure/azure-functions/flex-consumption-plan#instance-memory; https://learn.microsoft.com/en-us/azure/azure-functions/functions-premium-plan#available-instance-skus',
    read: '2026-12-01',
    covers: 'memory sizes each platform accepts (GCF 128Mi..32Gi; Flex 512/2048/4096 MB; Premium EP1/EP2/EP3 3.5/7/14 GB)',
  },
];

const Y: Offer = 'yes';
const N: Offer = 'no';
const U: Offer = 'unconfirmed';

type Row = readonly [code: string, name: string, lat: number, lon: number];

function awsRows(offers: AwsOffers, rows: readonly Row[]): AwsRegion[] {
  return rows.map(([code, name, lat, lon]) => ({ cloud: 'aws', code, name, lat, lon, offers }));
}
function gcpRows(offers: GcpOffers, rows: readonly Row[]): GcpRegion[] {
  return rows.map(([code, name, lat, lon]) => ({ cloud: 'gcp', code, name, lat, lon, offers }));
}
function azureRows(offers: AzureOffers, rows: readonly Row[]): AzureRegion[] {
  return rows.map(([code, name, lat, lon]) => ({ cloud: 'azure', code, name, lat, lon, offers }));
}

/** AWS: sources aws-partitions, aws-lambda-endpoints. */
export const AWS_REGIONS: readonly AwsRegion[] = [
  ...awsRows({ lambda: Y, dynamodb: Y }, [
    ['us-east-1', 'US East (N. Virginia)', 38.95, -77.45],
    ['us-east-2', 'US East (Ohio)', 39.96, -83.0],
    ['us-west-1', 'US West (N. California)', 37.35, -121.96],
    ['us-west-2', 'US West (Oregon)', 45.84, -119.7],
    ['ca-central-1', 'Canada (Central), Montréal', 45.5, -73.57],
    ['ca-west-1', 'Canada West (Calgary)', 51.05, -114.07],
    ['mx-central-1', 'Mexico (Central), Querétaro', 20.59, -100.39],
    ['sa-east-1', 'South America (São Paulo)', -23.55, -46.63],
    ['eu-west-1', 'Europe (Ireland), Dublin', 53.35, -6.26],
    ['eu-west-2', 'Europe (London)', 51.51, -0.13],
    ['eu-west-3', 'Europe (Paris)', 48.86, 2.35],
    ['eu-central-1', 'Europe (Frankfurt)', 50.11, 8.68],
    ['eu-central-2', 'Europe (Zurich)', 47.37, 8.54],
    ['eu-north-1', 'Europe (Stockholm)', 59.33, 18.07],
    ['eu-south-1', 'Europe (Milan)', 45.46, 9.19],
    ['eu-south-2', 'Europe (Spain), Aragón', 41.65, -0.88],
    ['il-central-1', 'Israel (Tel Aviv)', 32.09, 34.78],
    ['me-south-1', 'Middle East (Bahrain)', 26.07, 50.56],
    ['me-central-1', 'Middle East (UAE)', 24.45, 54.38],
    ['af-south-1', 'Africa (Cape Town)', -33.92, 18.42],
    ['ap-east-1', 'Asia Pacific (Hong Kong)', 22.32, 114.17],
    ['ap-south-1', 'Asia Pacific (Mumbai)', 19.08, 72.88],
    ['ap-south-2', 'Asia Pacific (Hyderabad)', 17.39, 78.49],
    ['ap-northeast-1', 'Asia Pacific (Tokyo)', 35.68, 139.69],
    ['ap-northeast-2', 'Asia Pacific (Seoul)', 37.57, 126.98],
    ['ap-northeast-3', 'Asia Pacific (Osaka)', 34.69, 135.5],
    ['ap-southeast-1', 'Asia Pacific (Singapore)', 1.29, 103.85],
    ['ap-southeast-2', 'Asia Pacific (Sydney)', -33.87, 151.21],
    ['ap-southeast-3', 'Asia Pacific (Jakarta)', -6.21, 106.85],
    ['ap-southeast-4', 'Asia Pacific (Melbourne)', -37.81, 144.96],
    ['ap-southeast-5', 'Asia Pacific (Malaysia), Kuala Lumpur', 3.14, 101.69],
    ['ap-southeast-7', 'Asia Pacific (Thailand), Bangkok', 13.76, 100.5],
  ]),
  // Opened in 2025: in the SDK's region list, Lambda/DynamoDB endpoints not seen.
  ...awsRows({ lambda: U, dynamodb: U }, [
    ['ap-east-2', 'Asia Pacific (Taipei)', 25.03, 121.57],
    ['ap-southeast-6', 'Asia Pacific (New Zealand), Auckland', -36.85, 174.76],
    ['me-west-1', 'Middle East (Saudi Arabia)', 24.71, 46.68],
    ['sa-west-1', 'South America (Chile), Santiago', -33.45, -70.67],
  ]),
];

/** Google Cloud: sources gcp-cloud-run-locations, gcp-functions-locations, gcp-firestore-locations. */
export const GCP_REGIONS: readonly GcpRegion[] = [
  ...gcpRows({ gcf2: Y, firestore: Y }, [
    ['us-central1', 'Iowa', 41.26, -95.86],
    ['us-east1', 'South Carolina', 33.2, -80.01],
    ['us-east4', 'Northern Virginia', 39.04, -77.49],
    ['us-east5', 'Columbus', 39.96, -83.0],
    ['us-south1', 'Dallas', 32.78, -96.8],
    ['us-west1', 'Oregon', 45.59, -121.18],
    ['us-west2', 'Los Angeles', 34.05, -118.24],
    ['us-west3', 'Salt Lake City', 40.76, -111.89],
    ['us-west4', 'Las Vegas', 36.17, -115.14],
    ['northamerica-northeast1', 'Montréal', 45.5, -73.57],
    ['northamerica-northeast2', 'Toronto', 43.65, -79.38],
    ['southamerica-east1', 'São Paulo', -23.53, -46.79],
    ['southamerica-west1', 'Santiago', -33.45, -70.67],
    ['europe-west1', 'Belgium (St. Ghislain)', 50.45, 3.82],
    ['europe-west2', 'London', 51.51, -0.13],
    ['europe-west3', 'Frankfurt', 50.11, 8.68],
    ['europe-west4', 'Netherlands (Eemshaven)', 53.44, 6.83],
    ['europe-west6', 'Zurich', 47.37, 8.54],
    ['europe-west8', 'Milan', 45.46, 9.19],
    ['europe-west9', 'Paris', 48.86, 2.35],
    ['europe-west10', 'Berlin', 52.52, 13.4],
    ['europe-west12', 'Turin', 45.07, 7.69],
    ['europe-north1', 'Finland (Hamina)', 60.57, 27.19],
    ['europe-central2', 'Warsaw', 52.23, 21.01],
    ['europe-southwest1', 'Madrid', 40.42, -3.7],
    ['me-west1', 'Tel Aviv', 32.09, 34.78],
    ['me-central1', 'Doha', 25.29, 51.53],
    ['me-central2', 'Dammam', 26.43, 50.1],
    ['africa-south1', 'Johannesburg', -26.2, 28.05],
    ['asia-east1', 'Taiwan (Changhua)', 24.05, 120.52],
    ['asia-east2', 'Hong Kong', 22.32, 114.17],
    ['asia-northeast1', 'Tokyo', 35.68, 139.69],
    ['asia-northeast2', 'Osaka', 34.69, 135.5],
    ['asia-northeast3', 'Seoul', 37.57, 126.98],
    ['asia-south1', 'Mumbai', 19.08, 72.88],
    ['asia-south2', 'Delhi', 28.61, 77.21],
    ['asia-southeast1', 'Singapore (Jurong West)', 1.34, 103.71],
    ['asia-southeast2', 'Jakarta', -6.21, 106.85],
    ['australia-southeast1', 'Sydney', -33.87, 151.21],
    ['australia-southeast2', 'Melbourne', -37.81, 144.96],
  ]),
  // Firestore lists these; the Cloud Run location list that was read did not.
  ...gcpRows({ gcf2: U, firestore: Y }, [
    ['europe-north2', 'Stockholm', 59.33, 18.07],
    ['northamerica-south1', 'Querétaro', 20.59, -100.39],
  ]),
];

/** Azure: sources azure-locations, azure-flex-regions, azure-premium-regions, azure-consumption-regions. */
export const AZURE_REGIONS: readonly AzureRegion[] = [
  // Flex Consumption in the quickstart's list, Premium in the cmdlet's example.
  ...azureRows({ consumption: Y, flex: Y, premium: Y, tableStorage: Y }, [
    ['eastus', 'East US (Virginia)', 37.3719, -79.8164],
    ['eastus2', 'East US 2 (Virginia)', 36.6681, -78.3889],
    ['centralus', 'Central US (Iowa)', 41.5908, -93.6208],
    ['northcentralus', 'North Central US (Illinois)', 41.8819, -87.6278],
    ['southcentralus', 'South Central US (Texas)', 29.4167, -98.5],
    ['westus', 'West US (California)', 37.783, -122.417],
    ['westus2', 'West US 2 (Washington)', 47.233, -119.852],
    ['canadacentral', 'Canada Central (Toronto)', 43.653, -79.383],
    ['brazilsouth', 'Brazil South (São Paulo State)', -23.55, -46.633],
    ['northeurope', 'North Europe (Ireland)', 53.3478, -6.2597],
    ['westeurope', 'West Europe (Netherlands)', 52.3667, 4.9],
    ['uksouth', 'UK South (London)', 50.941, -0.799],
    ['ukwest', 'UK West (Cardiff)', 53.427, -3.084],
    ['francecentral', 'France Central (Paris)', 46.3772, 2.373],
    ['germanywestcentral', 'Germany West Central (Frankfurt)', 50.110924, 8.682127],
    ['norwayeast', 'Norway East (Oslo)', 59.913868, 10.752245],
    ['eastasia', 'East Asia (Hong Kong)', 22.267, 114.188],
    ['southeastasia', 'Southeast Asia (Singapore)', 1.283, 103.833],
    ['japaneast', 'Japan East (Tokyo, Saitama)', 35.68, 139.77],
    ['koreacentral', 'Korea Central (Seoul)', 37.5665, 126.978],
    ['southindia', 'South India (Chennai)', 12.9822, 80.1636],
    ['australiaeast', 'Australia East (New South Wales)', -33.86, 151.2094],
    ['australiasoutheast', 'Australia Southeast (Victoria)', -37.8136, 144.9631],
  ]),
  // Flex Consumption in the quickstart's list, Premium not in the cmdlet's example.
  ...azureRows({ consumption: Y, flex: Y, premium: U, tableStorage: Y }, [
    ['westcentralus', 'West Central US (Wyoming)', 40.89, -110.234],
    ['westus3', 'West US 3 (Phoenix)', 33.448376, -112.074036],
    ['swedencentral', 'Sweden Central (Gävle)', 60.67488, 17.14127],
    ['centralindia', 'Central India (Pune)', 18.5822, 73.9197],
    ['uaenorth', 'UAE North (Dubai)', 25.266666, 55.316666],
    ['southafricanorth', 'South Africa North (Johannesburg)', -25.73134, 28.21837],
  ]),
  // Flex Consumption in the quickstart's list; regions opened 2023+: Consumption and Premium unconfirmed.
  ...azureRows({ consumption: U, flex: Y, premium: U, tableStorage: Y }, [
    ['italynorth', 'Italy North (Milan)', 45.46888, 9.18109],
    ['spaincentral', 'Spain Central (Madrid)', 40.4259, -3.4209],
  ]),
  // General-access regions without Flex Consumption in the quickstart's list.
  ...azureRows({ consumption: Y, flex: N, premium: Y, tableStorage: Y }, [
    ['canadaeast', 'Canada East (Québec)', 46.817, -71.217],
    ['westindia', 'West India (Mumbai)', 19.088, 72.868],
    ['japanwest', 'Japan West (Osaka)', 34.6939, 135.5022],
    ['australiacentral', 'Australia Central (Canberra)', -35.3075, 149.1244],
  ]),
  ...azureRows({ consumption: Y, flex: N, premium: U, tableStorage: Y }, [
    ['switzerlandnorth', 'Switzerland North (Zurich)', 47.451542, 8.564572],
    ['koreasouth', 'Korea South (Busan)', 35.1796, 129.0756],
  ]),
  // Opened 2022 and later, without Flex Consumption in the quickstart's list.
  ...azureRows({ consumption: U, flex: N, premium: U, tableStorage: Y }, [
    ['polandcentral', 'Poland Central (Warsaw)', 52.23334, 21.01666],
    ['qatarcentral', 'Qatar Central (Doha)', 25.551462, 51.439327],
    ['israelcentral', 'Israel Central', 31.2655698, 33.4506633],
    ['mexicocentral', 'Mexico Central (Querétaro)', 20.588818, -100.389888],
    ['newzealandnorth', 'New Zealand North (Auckland)', -36.84853, 174.76349],
    ['austriaeast', 'Austria East (Vienna)', 48.21, 16.37],
    ['belgiumcentral', 'Belgium Central (Brussels)', 50.85, 4.35],
    ['chilecentral', 'Chile Central (Santiago)', -33.45, -70.66],
    ['indonesiacentral', 'Indonesia Central (Jakarta)', -6.21, 106.85],
    ['malaysiawest', 'Malaysia West (Kuala Lumpur)', 3.14, 101.69],
  ]),
  // Restricted-access regions (opened to customers on request).
  ...azureRows({ consumption: U, flex: N, premium: U, tableStorage: Y }, [
    ['francesouth', 'France South (Marseille)', 43.8345, 2.1972],
    ['germanynorth', 'Germany North (Berlin)', 53.073635, 8.806422],
    ['switzerlandwest', 'Switzerland West (Geneva)', 46.204391, 6.143158],
    ['norwaywest', 'Norway West (Stavanger)', 58.969975, 5.733107],
    ['uaecentral', 'UAE Central (Abu Dhabi)', 24.466667, 54.366667],
    ['southafricawest', 'South Africa West (Cape Town)', -34.075691, 18.843266],
    ['brazilsoutheast', 'Brazil Southeast (Rio)', -22.90278, -43.2075],
  ]),
];
