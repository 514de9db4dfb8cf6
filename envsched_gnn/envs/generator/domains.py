"""The 51 domains of the built-in pool: entities, fields, status machines and rules.

Every domain has an *owner* entity (people or organisations, found by name), a
*record* entity (what tasks create, change and remove; it has a status machine
``start -> done`` and a closing verb), optionally an *assignee* entity (whom a record
is assigned to, with a capacity or availability rule), and its own rules: an
eligibility rule gating creation, a validation rule gating the forward transition, a
delete style (remove the record or close it) and the set of optional tools.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entity:
    """An entity type: ``singular`` names its id argument, ``plural`` its state attribute."""

    singular: str
    plural: str
    prefix: str


@dataclass(frozen=True)
class Eligibility:
    """Who may get a new record.

    ``kind``: ``min`` (owner ``attribute`` >= ``threshold``), ``max`` (<= ``threshold``),
    ``flag`` (owner ``attribute`` == ``values[0]``) or ``count`` (fewer than ``threshold``
    records that are not closed). ``low``/``high`` bound the numeric attribute.
    """

    kind: str
    attribute: str = ""
    low: int = 0
    high: int = 0
    threshold: int = 0
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class Domain:
    """One environment of the pool; see the module docstring for the roles."""

    key: str
    class_name: str
    summary: str
    owner: Entity
    record: Entity
    assignee: Entity | None
    assignee_rule: str  # "capacity" or "available"
    statuses: tuple[str, str, str]  # start, done, closed
    create_verb: str
    forward_verb: str
    delete_verb: str
    reassign_verb: str
    category: str
    category_values: tuple[str, ...]
    amount: str
    amount_range: tuple[int, int]
    owner_field: str
    owner_field_values: tuple[str, ...]
    eligibility: Eligibility | None
    hold_verb: str  # tool that flags an owner when not eligible ("" without eligibility)
    hold_field: str
    validation: str  # "", "limit" (amount <= limit of its category) or "assigned"
    delete_style: str  # "remove" or "status"
    delete_from_done: bool  # whether done records may be deleted too
    list_tool: bool
    amount_tool: bool
    owner_tool: bool
    update_verb: str
    validate_verb: str

    @property
    def amount_limits(self) -> dict[str, int]:
        """Validation limit of each category value: rising shares of the amount range."""
        low, high = self.amount_range
        n = len(self.category_values)
        return {
            value: low + (high - low) * (i + 1) // (n + 1)
            for i, value in enumerate(self.category_values)
        }


def _entity(text: str) -> Entity:
    singular, plural, prefix = text.split()
    return Entity(singular, plural, prefix)


def _eligibility(text: str) -> Eligibility | None:
    if not text:
        return None
    kind, *rest = text.split()
    if kind == "count":
        return Eligibility("count", threshold=int(rest[0]))
    if kind == "flag":
        return Eligibility("flag", attribute=rest[0], values=tuple(rest[1:]))
    attribute, low, high, threshold = rest
    return Eligibility(kind, attribute, int(low), int(high), int(threshold))


def _domain(
    index: int,
    key: str,
    class_name: str,
    summary: str,
    owner: str,
    record: str,
    assignee: str,
    statuses: str,
    verbs: str,
    category: str,
    amount: str,
    owner_field: str,
    *,
    eligibility: str = "",
    hold: str = "",
    validation: str = "",
    delete: str = "status",
    tools: str = "",
) -> Domain:
    assignee_parts = assignee.split()
    create, forward, delete_verb, *reassign = verbs.split()
    category_name, category_values = category.split(":")
    amount_name, low, high = amount.split()
    owner_name, owner_values = owner_field.split(":")
    hold_verb, hold_field = hold.split() if hold else ("", "")
    return Domain(
        key=key,
        class_name=class_name,
        summary=summary,
        owner=_entity(owner),
        record=_entity(record),
        assignee=_entity(" ".join(assignee_parts[:3])) if assignee_parts else None,
        assignee_rule=assignee_parts[3] if assignee_parts else "",
        statuses=tuple(statuses.split()),
        create_verb=create,
        forward_verb=forward,
        delete_verb=delete_verb,
        reassign_verb=reassign[0] if reassign else "",
        category=category_name.strip(),
        category_values=tuple(category_values.split()),
        amount=amount_name,
        amount_range=(int(low), int(high)),
        owner_field=owner_name.strip(),
        owner_field_values=tuple(owner_values.split()),
        eligibility=_eligibility(eligibility),
        hold_verb=hold_verb,
        hold_field=hold_field,
        validation=validation,
        delete_style=delete.split("+")[0],
        delete_from_done=delete.endswith("+done"),
        list_tool="list" in tools.split(),
        amount_tool="amount" in tools.split(),
        owner_tool="owner" in tools.split(),
        update_verb=("update", "change", "set")[index % 3],
        validate_verb=("validate", "verify")[index % 2],
    )


_SPECS = (
    ("insurance_policies", "InsurancePolicyDesk",
     "Insurance back office: customers hold policies that agents service.",
     "customer customers CUS", "policy policies POL", "agent agents AGT capacity",
     "pending active cancelled", "issue activate cancel reassign",
     "plan: basic silver gold platinum", "coverage 1000 90000", "region: north south east west",
     dict(eligibility="min age 16 90 18", hold="flag flagged", validation="limit",
          tools="list")),
    ("health_records", "HealthRecordSystem",
     "Clinic record system: patients have encounter notes that physicians sign.",
     "patient patients PAT", "encounter encounters ENC", "physician physicians PHY available",
     "draft signed archived", "record sign archive transfer",
     "visit_type: checkup followup urgent telehealth", "duration_min 10 120",
     "insurer: medicare medicaid private none",
     dict(eligibility="flag consent given withdrawn", hold="hold on_hold",
          validation="assigned", tools="")),
    ("blood_donation", "BloodDonationScheduler",
     "Blood service: donors book donation appointments at collection centers.",
     "donor donors DON", "appointment appointments APT", "center centers CTR capacity",
     "booked confirmed cancelled", "book confirm cancel move",
     "donation_type: whole_blood plasma platelets double_red", "volume_ml 200 500",
     "blood_group: O+ O- A+ A- B+ AB+",
     dict(eligibility="min days_since_donation 0 200 56", hold="waitlist waitlisted",
          delete="remove", tools="list")),
    ("library_holds", "LibraryHoldDesk",
     "Public library: members place holds on titles for pickup at a branch.",
     "member members MEM", "hold holds HLD", "branch branches BRN available",
     "waiting ready cancelled", "place fulfill cancel transfer",
     "format: hardcover paperback ebook audiobook", "pickup_days 1 14",
     "membership_tier: basic plus premium",
     dict(eligibility="max fines 0 40 5", hold="suspend suspended", delete="status+done",
          tools="list owner")),
    ("payroll_timesheets", "PayrollOffice",
     "Payroll office: employees log timesheets that managers approve.",
     "employee employees EMP", "timesheet timesheets TMS", "manager managers MGR available",
     "draft approved voided", "log approve void reassign",
     "pay_period: weekly biweekly monthly", "hours 1 80",
     "department: ops sales finance engineering",
     dict(eligibility="flag contract active terminated", hold="hold on_hold",
          validation="limit", tools="")),
    ("vehicle_rentals", "CarRentalCounter",
     "Car rental counter: renters reserve rentals of specific vehicles.",
     "renter renters RNT", "rental rentals RNL", "vehicle vehicles VEH available",
     "reserved active cancelled", "reserve activate cancel swap",
     "car_class: economy compact suv van", "days 1 30", "license_state: ca ny tx wa",
     dict(eligibility="min age 18 80 21", hold="flag flagged", delete="remove",
          tools="amount list")),
    ("hotel_reservations", "HotelFrontDesk",
     "Hotel front desk: guests hold bookings for rooms.",
     "guest guests GST", "booking bookings BKG", "room rooms RM available",
     "held confirmed cancelled", "book confirm cancel move",
     "rate_plan: standard flexible breakfast member", "nights 1 21",
     "loyalty: none silver gold",
     dict(eligibility="count 2", hold="flag flagged", tools="list owner")),
    ("restaurant_reservations", "RestaurantBookings",
     "Restaurant host stand: diners reserve tables.",
     "diner diners DIN", "reservation reservations RSV", "table tables TBL available",
     "requested confirmed cancelled", "reserve confirm cancel switch",
     "seating: indoor patio bar counter", "party_size 1 12",
     "allergy_note: none nuts gluten dairy",
     dict(delete="remove", tools="")),
    ("clinic_appointments", "OutpatientScheduler",
     "Outpatient clinic: patients schedule appointments with doctors.",
     "patient patients PAT", "appointment appointments APT", "doctor doctors DOC capacity",
     "scheduled confirmed cancelled", "schedule confirm cancel reassign",
     "visit_reason: checkup vaccination followup consult", "duration_min 15 90",
     "preferred_contact: phone email sms",
     dict(eligibility="max missed_visits 0 6 2", hold="flag flagged", tools="list owner")),
    ("veterinary_visits", "VetClinic",
     "Veterinary clinic: clients book visits for their animals with a vet.",
     "client clients CLI", "visit visits VIS", "vet vets VET capacity",
     "booked completed cancelled", "book complete cancel reassign",
     "species: dog cat rabbit bird", "weight_kg 1 80", "care_plan: none wellness premium",
     dict(validation="assigned", delete="remove", tools="list amount")),
    ("university_enrollment", "RegistrarOffice",
     "University registrar: students register enrollments in course sections.",
     "student students STU", "enrollment enrollments ENR", "section sections SEC capacity",
     "pending enrolled dropped", "register approve drop transfer",
     "grading: letter pass_fail audit", "credits 1 6", "program: cs math history biology",
     dict(eligibility="flag standing good probation suspended", hold="hold on_hold",
          tools="list")),
    ("gym_classes", "GymFrontDesk",
     "Gym front desk: members book fitness classes led by trainers.",
     "member members MEM", "class_booking class_bookings CLB", "trainer trainers TRN capacity",
     "booked attended cancelled", "book complete cancel switch",
     "class_type: yoga spin pilates boxing", "minutes 30 90",
     "membership: monthly annual student",
     dict(eligibility="count 3", hold="flag flagged", delete="remove", tools="list")),
    ("event_ticketing", "BoxOffice",
     "Box office: attendees reserve tickets in seating zones.",
     "attendee attendees ATT", "ticket tickets TKT", "zone zones ZON capacity",
     "reserved confirmed voided", "reserve confirm void relocate",
     "ticket_type: general vip student", "seats 1 8", "city: boston denver austin miami",
     dict(eligibility="max unpaid_orders 0 3 0", hold="flag flagged",
          delete="status+done", tools="amount")),
    ("airline_bookings", "AirlineReservations",
     "Airline reservations: passengers hold bookings on flights.",
     "passenger passengers PSG", "booking bookings BKG", "flight flights FLT capacity",
     "held ticketed cancelled", "book confirm cancel rebook",
     "cabin: economy premium business", "bags 0 4", "frequent_flyer: none silver gold",
     dict(eligibility="flag passport valid expired", hold="hold on_hold",
          tools="list")),
    ("support_tickets", "HelpdeskQueue",
     "Help desk: customers open tickets worked by support agents.",
     "customer customers CUS", "ticket tickets TIC",
     "support_agent support_agents SUP capacity",
     "new completed closed", "open complete close reassign",
     "priority: low normal high urgent", "effort_hours 1 40", "plan: free pro enterprise",
     dict(validation="assigned", tools="list amount owner")),
    ("bank_accounts", "BranchBanking",
     "Bank branch: customers open accounts managed by bankers.",
     "customer customers CUS", "account accounts ACC", "banker bankers BNK available",
     "pending active closed", "open activate close transfer",
     "account_type: checking savings business student", "overdraft_limit 0 5000",
     "segment: retail private small_business",
     dict(eligibility="min credit_score 300 850 600", hold="hold on_hold",
          validation="limit", tools="owner")),
    ("loan_applications", "LoanOrigination",
     "Lender: applicants file loan applications that underwriters review.",
     "applicant applicants APL", "application applications APP",
     "underwriter underwriters UWR capacity",
     "submitted approved withdrawn", "file approve withdraw reassign",
     "loan_type: auto home personal student", "amount 1000 400000",
     "employment: salaried self_employed retired",
     dict(eligibility="min credit_score 300 850 620", hold="refer referred",
          validation="limit", tools="list")),
    ("apartment_leasing", "LeasingOffice",
     "Leasing office: tenants sign leases for apartment units.",
     "tenant tenants TEN", "lease leases LSE", "unit units UNT available",
     "draft signed terminated", "create sign terminate move",
     "term: six_month annual two_year", "rent 600 4000", "pets: none cat dog",
     dict(eligibility="min monthly_income 1000 12000 3000", hold="flag flagged",
          tools="owner")),
    ("maintenance_work_orders", "FacilitiesWorkOrders",
     "Facilities team: requesters open work orders done by technicians.",
     "requester requesters REQ", "work_order work_orders WO",
     "technician technicians TEC capacity",
     "open completed cancelled", "open complete cancel reassign",
     "trade: plumbing electrical hvac carpentry", "estimate_hours 1 24",
     "building: north_tower south_tower annex",
     dict(validation="assigned", delete="remove", tools="list amount owner")),
    ("purchase_orders", "ProcurementDesk",
     "Procurement: purchase orders to suppliers, delivered to warehouses.",
     "supplier suppliers SPL", "purchase_order purchase_orders PO",
     "warehouse warehouses WH capacity",
     "draft approved cancelled", "create approve cancel reroute",
     "priority: low normal high", "quantity 1 1000", "rating: a b c",
     dict(eligibility="flag compliance approved pending blocked", hold="hold on_hold",
          validation="limit", delete="status+done", tools="")),
    ("ecommerce_orders", "WebShopOrders",
     "Web shop: shoppers place orders delivered by couriers.",
     "shopper shoppers SHP", "order orders ORD", "courier couriers CUR available",
     "placed shipped cancelled", "place ship cancel switch",
     "shipping: standard express overnight", "items 1 20", "tier: regular vip",
     dict(eligibility="max chargebacks 0 5 1", hold="flag flagged", delete="remove",
          tools="list amount")),
    ("pharmacy_prescriptions", "PharmacyCounter",
     "Pharmacy: prescriptions for patients, filled by pharmacists.",
     "patient patients PAT", "prescription prescriptions RX",
     "pharmacist pharmacists PHM available",
     "pending filled voided", "issue fill void transfer",
     "drug_form: tablet capsule liquid inhaler", "quantity 1 180",
     "insurance: public private none",
     dict(eligibility="flag coverage_status active lapsed", hold="hold on_hold",
          validation="limit", tools="list")),
    ("scholarship_awards", "ScholarshipOffice",
     "Scholarship office: awards to students, reviewed by reviewers.",
     "student students STU", "award awards AWD", "reviewer reviewers REV capacity",
     "proposed granted revoked", "create grant revoke reassign",
     "fund: merit need athletic research", "amount 500 20000",
     "major: physics nursing law design",
     dict(eligibility="min gpa_points 200 400 300", hold="flag flagged",
          tools="")),
    ("parking_permits", "ParkingAuthority",
     "Parking authority: residents request permits for parking zones.",
     "resident residents RES", "permit permits PRM", "zone zones ZON capacity",
     "requested active revoked", "request activate revoke relocate",
     "vehicle_type: car motorcycle van ev", "months 1 12",
     "district: harbor hills midtown old_town",
     dict(eligibility="max unpaid_tickets 0 5 0", hold="hold on_hold",
          delete="status+done", tools="list amount")),
    ("utility_service_requests", "UtilityServiceDesk",
     "Utility company: account holders open service requests handled by crews.",
     "account_holder account_holders ACH", "service_request service_requests SRQ",
     "crew crews CRW capacity",
     "open dispatched cancelled", "open dispatch cancel reassign",
     "service: connect disconnect meter_check repair", "window_hours 2 48",
     "tariff: residential commercial",
     dict(eligibility="max overdue_bills 0 6 2", hold="flag flagged",
          validation="assigned", delete="remove", tools="list")),
    ("court_hearings", "CourtDocket",
     "Court docket: attorneys schedule hearings in courtrooms.",
     "attorney attorneys ATY", "hearing hearings HRG", "courtroom courtrooms CRT capacity",
     "scheduled confirmed cancelled", "schedule confirm cancel move",
     "hearing_type: motion trial status_conference sentencing", "minutes 15 240",
     "practice: criminal civil family",
     dict(eligibility="flag bar_standing active suspended", hold="hold on_hold",
          tools="list")),
    ("meeting_rooms", "RoomBookingService",
     "Office services: employees book meeting rooms.",
     "employee employees EMP", "room_booking room_bookings RBK", "room rooms RM available",
     "tentative confirmed cancelled", "book confirm cancel move",
     "layout: boardroom classroom theater", "attendees 1 40",
     "department: legal marketing research support",
     dict(eligibility="count 2", hold="flag flagged", delete="remove",
          tools="amount owner")),
    ("volunteer_shifts", "VolunteerCoordinator",
     "Volunteer program: volunteers register for shifts run by coordinators.",
     "volunteer volunteers VOL", "signup signups SGN", "coordinator coordinators CRD capacity",
     "pending confirmed withdrawn", "register confirm withdraw reassign",
     "role: kitchen driver greeter cleanup", "hours 1 8", "shirt_size: s m l xl",
     dict(eligibility="min age 12 80 16", hold="waitlist waitlisted",
          tools="list amount")),
    ("pet_adoption", "AdoptionShelter",
     "Animal shelter: adopters file adoption applications guided by counselors.",
     "adopter adopters ADP", "application applications ADA",
     "counselor counselors CNS available",
     "submitted approved withdrawn", "file approve withdraw reassign",
     "animal: dog cat rabbit", "home_visit_days 1 30", "housing: house apartment farm",
     dict(eligibility="min age 16 85 21", hold="hold on_hold", validation="assigned",
          tools="")),
    ("fleet_service", "FleetServiceCenter",
     "Fleet service center: drivers schedule service jobs done by mechanics.",
     "driver drivers DRV", "service_job service_jobs SVJ", "mechanic mechanics MEC capacity",
     "queued completed cancelled", "schedule complete cancel reassign",
     "job_type: oil_change brakes tires inspection", "labor_hours 1 16",
     "depot: east_yard west_yard airport",
     dict(validation="limit", delete="remove", tools="list amount owner")),
    ("saas_subscriptions", "SubscriptionBilling",
     "Software vendor: subscribers hold subscriptions billed per seat.",
     "subscriber subscribers SUB", "subscription subscriptions SBN", "",
     "trial active cancelled", "create activate cancel",
     "plan: starter team business enterprise", "seats 1 500",
     "billing_cycle: monthly annual",
     dict(eligibility="max overdue_invoices 0 4 0", hold="hold on_hold",
          validation="limit", tools="list amount owner")),
    ("clinical_trials", "TrialEnrollment",
     "Clinical trial office: participants are screened and admitted at trial sites.",
     "participant participants PTC", "screening screenings SCR", "site sites SIT capacity",
     "pending admitted withdrawn", "register admit withdraw transfer",
     "arm: placebo low_dose high_dose", "visits 1 12", "sex: f m",
     dict(eligibility="min age 14 90 18", hold="refer referred", tools="list")),
    ("vaccination_clinic", "ImmunizationClinic",
     "Immunization clinic: patients book vaccinations given by nurses.",
     "patient patients PAT", "vaccination vaccinations VAC", "nurse nurses NRS capacity",
     "booked completed cancelled", "book complete cancel reassign",
     "vaccine: flu covid hepatitis tetanus", "dose_number 1 4",
     "risk_group: standard elevated",
     dict(eligibility="min days_since_last_dose 0 365 28", hold="waitlist waitlisted",
          delete="remove", tools="amount")),
    ("real_estate_listings", "ListingsDesk",
     "Real-estate agency: sellers' property listings handled by brokers.",
     "seller sellers SEL", "listing listings LST", "broker brokers BRK capacity",
     "draft published withdrawn", "create publish withdraw transfer",
     "property_type: condo house townhouse land", "price 50000 2000000",
     "contact_channel: phone email text",
     dict(validation="limit", tools="list amount owner")),
    ("grant_proposals", "ResearchGrantsOffice",
     "Research office: researchers submit grant proposals to review panels.",
     "researcher researchers RSR", "proposal proposals PRP", "panel panels PNL capacity",
     "draft submitted withdrawn", "create submit withdraw reassign",
     "program: basic applied training", "budget 10000 500000", "rank: junior senior emeritus",
     dict(eligibility="count 2", hold="flag flagged", validation="limit",
          tools="list")),
    ("visa_applications", "ConsularServices",
     "Consulate: applicants file visa applications decided by officers.",
     "applicant applicants APL", "visa_application visa_applications VSA",
     "officer officers OFC capacity",
     "lodged approved withdrawn", "file approve withdraw reassign",
     "visa_class: tourist business student work", "stay_days 7 365",
     "language: english spanish french arabic",
     dict(eligibility="flag passport_status valid expired", hold="hold on_hold",
          validation="limit", tools="list")),
    ("food_bank", "FoodBankPantry",
     "Food bank: households schedule pickups of food boxes.",
     "household households HH", "pickup pickups PCK", "",
     "scheduled completed cancelled", "schedule complete cancel",
     "box: standard vegetarian infant halal", "box_count 1 4",
     "size_band: single couple family large",
     dict(eligibility="count 2", hold="waitlist waitlisted", delete="remove",
          tools="list amount owner")),
    ("daycare_enrollment", "ChildcareCenter",
     "Childcare center: guardians enroll children in classrooms.",
     "guardian guardians GRD", "enrollment enrollments ENR",
     "classroom classrooms CLS capacity",
     "pending active withdrawn", "enroll activate withdraw transfer",
     "schedule: full_day half_day after_school", "days_per_week 1 5",
     "payment: card transfer voucher",
     dict(eligibility="flag immunization_status complete incomplete", hold="hold on_hold",
          tools="")),
    ("it_service_requests", "ITServiceDesk",
     "IT service desk: employees request devices delivered by technicians.",
     "employee employees EMP", "device_request device_requests DRQ",
     "technician technicians TEC capacity",
     "requested fulfilled cancelled", "request fulfill cancel reassign",
     "device: laptop monitor phone headset", "budget 100 3000",
     "office: berlin lisbon dublin",
     dict(validation="limit", delete="remove", tools="list amount owner")),
    ("legal_contracts", "ContractManagement",
     "Law firm: clients' contracts drafted and signed, handled by lawyers.",
     "client clients CLI", "contract contracts CTR", "lawyer lawyers LAW capacity",
     "draft signed terminated", "create sign terminate reassign",
     "contract_type: nda employment services lease", "value 1000 1000000",
     "industry: retail energy media health",
     dict(eligibility="flag kyc_status verified pending", hold="hold on_hold",
          validation="limit", delete="status+done", tools="list")),
    ("tax_filings", "TaxPrepService",
     "Tax preparation: taxpayers' returns prepared and submitted by preparers.",
     "taxpayer taxpayers TXP", "tax_return tax_returns TXR",
     "preparer preparers PRE capacity",
     "draft submitted voided", "create submit void reassign",
     "form: standard itemized business", "refund 0 20000",
     "filing_status: single married head_of_household",
     dict(eligibility="max open_notices 0 5 1", hold="flag flagged", validation="limit",
          tools="list")),
    ("sports_league", "LeagueOffice",
     "Youth sports league: coaches register teams in divisions.",
     "coach coaches CCH", "team_registration team_registrations TRG",
     "division divisions DIV capacity",
     "pending accepted withdrawn", "register accept withdraw move",
     "age_group: u10 u12 u14 u16", "roster_size 8 25", "club_region: coast valley metro",
     dict(eligibility="flag background_check cleared pending", hold="hold on_hold",
          tools="list amount")),
    ("museum_tours", "MuseumTours",
     "Museum: organizers book group tours with guides.",
     "organizer organizers ORG", "tour_booking tour_bookings TBK", "guide guides GDE capacity",
     "requested confirmed cancelled", "book confirm cancel reassign",
     "language: english spanish german", "group_size 2 30",
     "org_type: school company private",
     dict(delete="remove", tools="amount owner")),
    ("recycling_pickups", "WasteCollection",
     "City waste service: residents request bulky pickups on collection routes.",
     "resident residents RES", "pickup_request pickup_requests PUR", "route routes RTE capacity",
     "requested dispatched cancelled", "request dispatch cancel reroute",
     "material: bulky electronics yard hazardous", "volume_bags 1 20",
     "district: north south central",
     dict(eligibility="max missed_pickups 0 6 3", hold="flag flagged", delete="remove",
          tools="list")),
    ("dental_clinic", "DentalPractice",
     "Dental practice: patients accept treatment plans from dentists.",
     "patient patients PAT", "treatment_plan treatment_plans TRP",
     "dentist dentists DEN capacity",
     "proposed accepted cancelled", "create accept cancel reassign",
     "procedure: cleaning filling crown implant", "cost 50 5000",
     "insurance: none basic full",
     dict(eligibility="max outstanding_balance 0 2000 500", hold="hold on_hold",
          validation="limit", tools="list")),
    ("software_licenses", "LicenseDesk",
     "Software licensing: organizations hold licenses managed by account managers.",
     "organization organizations ORG", "license licenses LIC",
     "account_manager account_managers ACM available",
     "pending active revoked", "issue activate revoke transfer",
     "edition: standard pro enterprise", "seats 1 1000",
     "industry: finance education government",
     dict(eligibility="flag compliance_status cleared under_review", hold="hold on_hold",
          validation="limit", delete="status+done", tools="owner")),
    ("freight_shipments", "FreightBroker",
     "Freight broker: shippers book shipments moved by carriers.",
     "shipper shippers SHR", "shipment shipments SHM", "carrier carriers CAR capacity",
     "booked dispatched cancelled", "book dispatch cancel reassign",
     "mode: truck rail ocean air", "weight_tons 1 40",
     "payment_terms: prepaid net30 net60",
     dict(eligibility="max disputes 0 5 1", hold="hold on_hold", validation="limit",
          delete="remove", tools="list")),
    ("community_garden", "GardenAllotments",
     "Community garden: gardeners lease allotment plots.",
     "gardener gardeners GDN", "plot_lease plot_leases PLL", "plot plots PLT available",
     "pending active terminated", "register activate terminate move",
     "crop_plan: vegetables flowers herbs mixed", "beds 1 4", "experience: novice skilled",
     dict(eligibility="count 1", hold="waitlist waitlisted", tools="list owner")),
    ("coworking_desks", "CoworkingSpace",
     "Coworking space: members reserve desk bookings.",
     "member members MEM", "desk_booking desk_bookings DBK", "desk desks DSK available",
     "reserved active cancelled", "reserve activate cancel switch",
     "plan: hot_desk dedicated office", "days 1 31", "company_size: solo small large",
     dict(eligibility="max unpaid_invoices 0 4 0", hold="hold on_hold", delete="remove",
          tools="list amount")),
    ("music_lessons", "MusicSchool",
     "Music school: students schedule lessons with teachers.",
     "student students STU", "lesson lessons LSN", "teacher teachers TCH capacity",
     "requested confirmed cancelled", "schedule confirm cancel reassign",
     "instrument: piano guitar violin drums", "weeks 4 30",
     "level: beginner intermediate advanced",
     dict(eligibility="min age 4 80 6", hold="waitlist waitlisted", tools="list")),
    ("farmers_market", "MarketStallPermits",
     "Farmers market: vendors request stall permits at markets.",
     "vendor vendors VND", "stall_permit stall_permits STP", "market markets MKT capacity",
     "requested approved revoked", "request approve revoke transfer",
     "stall: produce bakery crafts prepared_food", "weeks 1 26",
     "certification: organic conventional",
     dict(eligibility="flag health_permit valid expired", hold="hold on_hold",
          validation="assigned", tools="list")),
)  # fmt: skip

DOMAINS: list[Domain] = [
    _domain(index, *spec[:-1], **spec[-1]) for index, spec in enumerate(_SPECS)
]

DOMAIN_BY_KEY = {domain.key: domain for domain in DOMAINS}
